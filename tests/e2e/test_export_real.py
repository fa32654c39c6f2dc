"""Export of a real trained LoRA run of SmolLM2-135M (a copy of the session's ``trained_run``):
merged float32 and GGUF f16 answer the check prompts like the adapter model, q4_k_m and q8_0 made
in one task report their agreement, a GGUF whose chat template and EOS were tampered with fails the check, the adapter zip
holds what it should, the CLI's exit codes; and an export + push through a real TaskRunner (of the
tiny model's run: what is tested there is the task, not the weights)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from trainer_core.export import gguf_convert
from trainer_core.export.gguf_export import check_gguf
from trainer_core.export.gguf_meta import compare_meta, read_meta
from trainer_core.export.job import make_reference
from trainer_core.export.llamacpp_check import llama_check
from trainer_core.export.schemas import ExportRequest, ExportResult, PushRequest
from trainer_core.export.weights import load_run
from trainer_core.export.worker import export
from trainer_core.llamacpp.build import missing_message as llama_cpp_missing
from trainer_core.serving.choices import weights_choice
from trainer_core.serving.errors import ChatInputError
from trainer_core.settings import get_settings

pytestmark = pytest.mark.slow
TOKEN = "hf_secret_token_for_tests_0123456789"
SKIP_RUN = ("optimizer.pt", "rng_state.pth", "scheduler.pt", "exports")


class Events(list):
    """Collects progress events (what the task runner's queue gets)."""

    def put(self, event):
        self.append(event)


@pytest.fixture(scope="module")
def run_copy(trained_run, tmp_path_factory) -> Path:
    """A copy of the trained run's folder (the fixture's own is shared and read-only)."""
    target = tmp_path_factory.mktemp("export-run") / trained_run.job_id
    shutil.copytree(trained_run.output_dir, target, ignore=shutil.ignore_patterns(*SKIP_RUN))
    return target


@pytest.fixture(scope="module")
def choice(run_copy, model_dir):
    return weights_choice(run_copy, "final", run_copy.name, str(model_dir), get_settings().models_dir)


def _export(choice, out: Path, fmt: str, dtype: str = "float32") -> tuple[ExportResult, Events]:
    out.mkdir(parents=True)
    events = Events()
    context = {"choice": choice.model_dump(), "output_dir": str(out), "models_dir": str(get_settings().models_dir)}
    return export(ExportRequest(model=choice.id, format=fmt, dtype=dtype), context, events, threading.Event()), events


@pytest.fixture(scope="module")
def merged(choice, tmp_path_factory) -> tuple[ExportResult, Path]:
    out = tmp_path_factory.mktemp("merged") / "export"
    return _export(choice, out, "merged", "float32")[0], out


@pytest.fixture(scope="module")
def reference(choice):
    run = load_run(choice, get_settings().models_dir)
    return make_reference(run.model, run.tokenizer), run.tokenizer


def _converter() -> Path:
    folder = get_settings().gguf_converter_dir
    if gguf_convert.missing_message(folder):
        pytest.skip("the GGUF converter is not installed (bash scripts/setup.sh)")
    return folder


@pytest.fixture(scope="module")
def gguf_f16(choice, tmp_path_factory) -> tuple[ExportResult, Path, Events]:
    _converter()
    out = tmp_path_factory.mktemp("f16") / "export"
    result, events = _export(choice, out, "gguf-f16")
    return result, out, events


def test_merged_float32_answers_exactly_like_the_adapter_model(merged, tokenizer):
    result, out = merged
    check = result.check
    assert check.passed and check.summary == "float32: 3/3 prompts, 60/60 tokens equal", check
    names = {f.name for f in result.files}
    assert {
        "model.safetensors",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "chat_template.jinja",
        "README.md",
    } <= names and not any(n.startswith(".") for n in names)
    config = json.loads((out / "config.json").read_text())
    assert config["dtype"] == "float32" and "LlamaForCausalLM" in config["architectures"]
    eos = json.loads((out / "generation_config.json").read_text())["eos_token_id"]
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in (eos if isinstance(eos, list) else [eos])
    card = (out / "README.md").read_text()
    for text in (
        "base_model: HuggingFaceTB/SmolLM2-135M-Instruct",
        "`identity.json`: 16 rows used",
        "| lora_r | 16 |",
        "final training loss",
        "60/60 tokens equal",
        "AutoModelForCausalLM.from_pretrained",
    ):
        assert text in card, text
    assert set(result.stage_seconds) == {"load", "reference", "merge", "save", "check", "card"}


def test_a_merged_export_is_a_chat_model_and_battles_its_run_in_the_arena(merged, choice, model_dir, tmp_path):
    """The merged export is listed beside the runs (kind ``merged``, its id the export's task id)
    and answers greedily exactly as the run it was merged from does: an arena battle between the
    two gives the same text on both sides, and the names come back after the vote."""
    from trainer_core.arena.battle import Arena
    from trainer_core.arena.schemas import BattleRequest
    from trainer_core.arena.store import ArenaStore
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.serving.schemas import GenerationSettings
    from trainer_core.settings import Settings
    from trainer_core.tasks.export_models import ExportModels
    from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
    from trainer_core.tasks.store import TaskStore

    result, out = merged
    roots = ",".join(str(p) for p in (Path(choice.path).parent, out.parent, model_dir))
    settings = Settings(data_dir=tmp_path, allowed_paths=roots)
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path))
    runner.store.create_run(choice.id, {"model_name": str(model_dir)}, choice.path, "completed")
    task = "export-20261206-100000-abcdef"
    record = TaskRecord(task_id=task, kind=TaskKind.export, job_id=choice.id, model=choice.id, output_dir=str(out))
    store = TaskStore(settings.db_path)
    store.save(record.model_copy(update={"phase": TaskPhase.completed, "result": result.model_dump()}))
    engine = ChatEngine(runner, settings, models=ExportModels(store, runner.store, settings))
    found = {c.id: c for c in engine.choices()}
    assert (
        found[task].kind == "merged"
        and not found[task].adapter
        and "merged float32 (check passed)" in found[task].label
    )
    assert found[task].base_model == str(model_dir) and engine.resolve(task).path == str(out)
    with pytest.raises(ChatInputError, match="is a merged model"):
        engine.resolve(f"{task}/q4_k_m")
    arena = Arena(engine, ArenaStore(settings.db_path))
    greedy = GenerationSettings(temperature=0, max_new_tokens=24)
    try:
        battle = arena.battle(BattleRequest(prompt="Who are you?", models=[task, choice.id], settings=greedy))
    finally:
        engine.unload()
    assert battle.left.text and battle.left.text == battle.right.text, battle
    shown = arena.vote(battle.battle_id, "tie")
    assert {shown.left.model, shown.right.model} == {task, choice.id}
    print("merged vs its run:", repr(battle.left.text))


def test_gguf_f16_answers_like_the_adapter_model_with_template_and_eos(gguf_f16, tokenizer):
    result, out, events = gguf_f16
    check = result.check
    assert check.passed, check
    assert check.chat_template_ok and check.eos_ok
    # every next-token prediction equals the adapter model's, except where its top two were nearly tied
    assert check.forced_tokens_equal + len(check.near_ties) == check.tokens_total == 60
    assert len(check.near_ties) <= 1 and check.problems == []
    [gguf] = [f.name for f in result.files if f.name.endswith(".gguf")]
    meta = read_meta(out / gguf)
    assert (
        meta.chat_template == tokenizer.chat_template
        and meta.eos == tokenizer.eos_token_id
        and meta.architecture == "llama"
    )
    assert not (out / ".merged").exists()
    assert any("GGUF f16:" in e[1]["message"] for e in events), "the converter's output is streamed"


def test_q4_k_m_and_q8_0_in_one_task_are_checked_by_llama_cpp(choice, tmp_path):
    """One conversion, two quantisations by llama.cpp; each file run in llama.cpp: its template
    renders a 3-turn chat with a system message to the tokenizer's ids, <|im_end|> ends generation,
    and its agreement with the run as trained is stated (q4_k_m: 55/60 predictions here)."""
    _converter()
    if llama_cpp_missing(get_settings().llama_cpp_dir):
        pytest.skip(llama_cpp_missing(get_settings().llama_cpp_dir))
    out = tmp_path / "export"
    out.mkdir()
    context = {"choice": choice.model_dump(), "output_dir": str(out), "models_dir": str(get_settings().models_dir)}
    request = ExportRequest(model=choice.id, format="gguf-q4_k_m", gguf_types=["q8_0"])
    events = Events()
    result = export(request, context, events, threading.Event())
    assert result.passed and [(g.type, g.file_type) for g in result.gguf] == [
        ("q4_k_m", "MOSTLY_Q4_K_M"),
        ("q8_0", "MOSTLY_Q8_0"),
    ]
    q4, q8 = result.gguf
    for g in (q4, q8):
        assert g.check.checked_by == "llama.cpp" and g.check.chat_template_ok and g.check.eos_ok, g.check
    assert q4.check.forced_tokens_equal >= 45 and "next-token predictions agree" in q4.check.summary, q4.check
    assert q8.check.forced_tokens_equal + len(q8.check.near_ties) == 60 and q8.second_opinion.passed
    assert q4.size_bytes < 0.8 * q8.size_bytes < 0.8 * 150e6  # 105 MB and 145 MB here
    assert sorted(p.name for p in out.glob("*.gguf")) == sorted(g.name for g in result.gguf)  # no f16 left
    assert not (out / ".merged").exists() and "quantize" in result.stage_seconds and result.check == q4.check
    for g in (q4, q8):
        meta = read_meta(out / g.name)
        assert meta.file_type == {"q4_k_m": 15, "q8_0": 7}[g.type] and g.size_bytes == (out / g.name).stat().st_size
        assert meta.name == f"{choice.base_model.rstrip('/').split('/')[-1]} ({choice.id})"
        assert g.check.tokens_total == 60 and len(g.check.samples) == 3
    messages = [e[1]["message"] for e in events]
    assert "Quantising to q4_k_m with llama.cpp" in messages and "Converting to GGUF f16" in messages
    assert not [m for m in messages if "llama_" in m or "INFO" in m or "blk." in m]  # words, not the tools' logs
    _listed_and_carded(out, request, result, choice)
    print("q4_k_m:", q4.check.summary, "| q8_0:", q8.check.summary)
    from tests.trainer_core.export.test_modelfile import CHAT, _template, render_go
    from trainer_core.models.loading import load_tokenizer

    tokenizer = load_tokenizer(Path(choice.path))
    want = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    for g in (q4, q8):  # Ollama's Modelfile beside each file: its TEMPLATE renders what the tokenizer renders
        modelfile = (out / g.name).with_suffix(".Modelfile").read_text()
        assert modelfile.startswith(f"# Ollama: ollama create NAME -f {Path(g.name).stem}.Modelfile\nFROM ./{g.name}\n")
        assert render_go(_template(modelfile), CHAT) == want and 'PARAMETER stop "<|im_end|>"' in modelfile
    _chat_with_the_export(tmp_path, out, result, choice)


def _listed_and_carded(out: Path, request: ExportRequest, result: ExportResult, choice) -> None:
    """The Export tab lists each file with its check; the export's card names each file and its Modelfile."""
    from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
    from ui.export_panel import _links as exports_links

    record = TaskRecord(
        task_id="export-1",
        kind=TaskKind.export,
        model=choice.id,
        phase=TaskPhase.completed,
        request=request.model_dump(),
        result=result.model_dump(),
        output_dir=str(out),
    )
    listed = exports_links(record)
    assert f"folder: `{out}`" in listed
    for g in result.gguf:
        assert f"`{g.name}`: {g.file_type}, " in listed
    assert "llama.cpp passed: q4_k_m in llama.cpp" in listed and "second opinion (transformers) agrees: q8_0" in listed
    card = (out / "README.md").read_text()
    for g in result.gguf:
        assert f"| `{g.name}` | {g.type} | {g.file_type} |" in card and f"{Path(g.name).stem}.Modelfile" in card


def _chat_with_the_export(data_dir: Path, out: Path, result: ExportResult, choice) -> None:
    """The q4_k_m file as a chat model (the Chat tab's and /v1's engine, llama.cpp worker): its
    greedy answer is llama.cpp's own greedy answer (the probe, from the run's tokenizer's ids)."""
    from trainer_core.llamacpp.client import run_probe
    from trainer_core.models.loading import load_tokenizer
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.serving.schemas import ChatMessage, GenerationSettings
    from trainer_core.settings import Settings
    from trainer_core.tasks.export_models import ExportModels
    from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
    from trainer_core.tasks.store import TaskStore

    settings = Settings(data_dir=data_dir, llama_cpp_dir=get_settings().llama_cpp_dir)
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path))
    runner.store.create_run(choice.id, {"model_name": choice.base_model}, choice.path, "completed")
    task = "export-20261205-100000-abcdef"
    record = TaskRecord(task_id=task, kind=TaskKind.export, job_id=choice.id, model=choice.id, output_dir=str(out))
    store = TaskStore(settings.db_path)
    store.save(record.model_copy(update={"phase": TaskPhase.completed, "result": result.model_dump()}))
    engine = ChatEngine(runner, settings, models=ExportModels(store, runner.store, settings))
    question = "Who are you?"
    try:
        answer = engine.complete(
            f"{task}/q4_k_m",
            [ChatMessage(role="user", content=question)],
            GenerationSettings(temperature=0, max_new_tokens=40),
        )
    finally:
        engine.unload()
    tokenizer = load_tokenizer(Path(choice.path))
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=True, add_generation_prompt=True
    )
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    probe = run_probe(
        {"op": "generate", "gguf": str(out / result.gguf[0].name), "prompt": ids, "max_tokens": 40},
        get_settings().llama_cpp_dir,
    )
    assert answer.prompt_tokens == len(ids) and answer.delta
    assert answer.delta == tokenizer.decode(probe["tokens"], skip_special_tokens=True), (answer.delta, probe)
    print("chat with the q4_k_m export:", repr(answer.delta))


def test_a_gguf_with_its_template_removed_and_eos_changed_fails_the_check(gguf_f16, reference, tmp_path):
    result, out, _ = gguf_f16
    ref, tokenizer = reference
    [gguf] = [f.name for f in result.files if f.name.endswith(".gguf")]
    broken = tmp_path / "broken.gguf"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gguf.scripts.gguf_new_metadata",
            str(out / gguf),
            str(broken),
            "--force",
            "--remove-metadata",
            "tokenizer.chat_template",
            "--special-token-by-id",
            "eos",
            "0",
        ],
        check=True,
        capture_output=True,
    )
    meta = compare_meta(read_meta(broken), tokenizer)
    assert not meta.chat_template_ok and not meta.eos_ok
    check = check_gguf(broken, "f16", ref, tokenizer)
    assert not check.passed and check.chat_template_ok is False and check.eos_ok is False
    assert any("no chat template" in p for p in check.problems)
    assert any("EOS token id is 0" in p for p in check.problems)
    folder = get_settings().llama_cpp_dir
    if not llama_cpp_missing(folder):  # llama.cpp itself finds no template to render
        run = llama_check(broken, "f16", ref, tokenizer, folder)
        assert not run.passed and run.chat_template_ok is False
        assert any("llama.cpp finds no chat template" in p for p in run.problems), run.problems


@pytest.fixture(scope="module")
def adapter_cli(run_copy, tmp_path_factory):
    """``python -m trainer_core export RUN --format adapter --output DIR`` (in this process):
    (exit code, stdout, DIR)."""
    import contextlib
    import io

    from trainer_core.cli import main

    out = tmp_path_factory.mktemp("adapter") / "export"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["export", str(run_copy), "--format", "adapter", "--output", str(out)])
    return code, stdout.getvalue(), out


def test_cli_adapter_export_exits_0_with_the_check(adapter_cli):
    code, printed, out = adapter_cli
    assert code == 0, printed
    assert "check passed: adapter: 3/3 prompts, 60/60 tokens equal" in printed and "-adapter.zip" in printed
    assert "stages: load" in printed


def test_adapter_zip_holds_adapter_tokenizer_and_card(adapter_cli):
    _, _, out = adapter_cli
    [archive] = list(out.iterdir())
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        config = json.loads(zf.read("adapter_config.json"))
        card = zf.read("README.md").decode()
    assert names == {
        "adapter_model.safetensors",
        "adapter_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "README.md",
    }
    assert config["base_model_name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    for text in (
        "PeftModel.from_pretrained",
        "library_name: peft",
        "adapter: 3/3 prompts, 60/60 tokens equal",
        "`identity.json`: 16 rows used",
    ):
        assert text in card, text


def test_cli_error_exits_1_and_leaves_nothing(run_copy, tmp_path, monkeypatch, capsys):
    from trainer_core.cli import main
    from trainer_core.export import gguf_export, merged, weights  # noqa: F401 - imported before the patch
    from trainer_core.models.loading import ModelLoadError

    # merged / gguf_export bind load_causal_lm by name when first imported: imported under the patch,
    # they would keep the broken stub for every later test in this process.
    def broken(*args, **kwargs):
        raise ModelLoadError("could not load the model from /nowhere")

    monkeypatch.setattr(weights, "load_causal_lm", broken)
    assert main(["export", str(run_copy), "--format", "merged", "--output", str(tmp_path / "err")]) == 1
    assert "could not load the model" in capsys.readouterr().err and not (tmp_path / "err").exists()


def _history_copy(trained_run, tmp_path: Path):
    """Settings + run history over a copy of the trained run (so the task may write exports/)."""
    from trainer_core.settings import Settings

    data = tmp_path / "data"
    folder = data / "runs" / trained_run.job_id
    shutil.copytree(trained_run.output_dir, folder, ignore=shutil.ignore_patterns(*SKIP_RUN))
    source, target = sqlite3.connect(trained_run.db_path), sqlite3.connect(data / "studio.db")
    source.backup(target)
    target.execute("UPDATE runs SET output_dir = ? WHERE job_id = ?", (str(folder), trained_run.job_id))
    target.commit()
    source.close()
    target.close()
    return Settings(data_dir=data, allowed_paths=str(trained_run.settings.allowed_paths)), folder


def test_export_and_push_through_a_real_task_runner(tiny_trained_run, tmp_path):
    from trainer_core.export.start import start_export, start_push
    from trainer_core.models.hub import hub_reachable
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.tasks.runner import TaskRunner
    from trainer_core.tasks.schemas import TaskPhase
    from trainer_core.tasks.store import TaskStore

    settings, folder = _history_copy(tiny_trained_run, tmp_path)  # the tiny model's run: plumbing only
    tasks = TaskRunner(
        JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path), warm_modules=()), settings
    )
    record = start_export(tasks, ExportRequest(model=tiny_trained_run.job_id, format="adapter"))
    assert tasks.wait(600)
    done = TaskStore(settings.db_path).get(record.task_id)
    assert done.phase == TaskPhase.completed, (done.error, done.message)
    assert done.result["passed"] and done.result["check"]["summary"] == "adapter: 3/3 prompts, 60/60 tokens equal"
    assert Path(done.output_dir).parent == folder / "exports"
    assert (Path(done.output_dir) / done.result["files"][0]["name"]).is_file()
    push = start_push(tasks, PushRequest(task_id=record.task_id, repo_id="someone/model", token=TOKEN))
    assert tasks.wait(120)
    pushed = TaskStore(settings.db_path).get(push.task_id)
    assert pushed.phase == TaskPhase.failed and pushed.output_dir is None
    if not hub_reachable():
        assert "could not reach huggingface.co" in pushed.error
    assert TOKEN not in pushed.model_dump_json() and TOKEN not in settings.db_path.read_bytes().decode("latin-1")
