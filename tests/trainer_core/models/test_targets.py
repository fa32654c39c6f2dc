"""Every model family users bring, on tiny random models (``tests/support/families.py``): the default
``target_modules`` adapt every linear projection in the blocks (fused ones, ``Conv1D``, MoE
experts; never lm_head, embeddings or routers), an explicit list that misses is refused naming
what the model has, each family's attention keeps packed rows apart, and each trains 2 LoRA steps
with the defaults (through the HTTP API: ``tests/e2e/test_families_api.py``; the CLI below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.support.families import FAMILIES, build_family_model, family_model
from trainer_core.models.targets import TargetError, find_blocks, resolve_targets
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.config import build_lora_config
from trainer_core.vocabulary import TrainingType


def _request(**fields) -> TrainingStartRequest:
    return TrainingStartRequest(model_name="m", local_datasets=["d.json"], **fields)


def _linear_paths(model) -> list[str]:
    """Every nn.Linear / Conv1D in the model, by full path (an independent walk, not the studio's)."""
    from transformers.pytorch_utils import Conv1D

    return [n for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, Conv1D))]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_defaults_adapt_every_block_projection_and_nothing_else(family):
    from peft import get_peft_model
    from peft.tuners.lora import LoraLayer

    model = family_model(family)
    blocks, layers = find_blocks(model)
    linear = _linear_paths(model)
    experts = [
        f"{n}.{p}"
        for n, m in model.named_modules()
        if n.endswith("experts")
        for p, w in m.named_parameters(recurse=False)
        if w.dim() == 3
    ]
    routers = [n for n, m in model.named_modules() if n.endswith((".router", ".gate")) and "experts" not in n]
    peft_model = get_peft_model(model, build_lora_config(_request(), model))
    wrapped = {
        n.removeprefix("base_model.model.")
        for n, m in peft_model.named_modules()
        if isinstance(m, LoraLayer) and ".base_layer" not in n and not getattr(m, "parameter_name", None)
    }
    in_blocks = {n for n in linear if n.startswith(blocks + ".")}
    assert wrapped == in_blocks and len(in_blocks) >= 4 * len(layers)
    assert not any(n.startswith(("lm_head", "model.embed")) for n in wrapped)
    parameters = {
        f"{n.removeprefix('base_model.model.').split('.base_layer')[0]}.{m.parameter_name}"
        for n, m in peft_model.named_modules()
        if getattr(m, "parameter_name", None)
    }
    assert parameters == set(experts)  # every expert weight, and nothing of the routers
    assert not any(r in n for r in routers for n in wrapped | parameters)


def test_the_switches_choose_attention_or_mlp():
    model = family_model("gpt2")  # attn.c_proj and mlp.c_proj share a name: the paths keep them apart
    attention = resolve_targets(model, ["all-linear"], attention=True, mlp=False)
    assert attention.modules == ("attn.c_attn", "attn.c_proj") and set(attention.kinds) == {"attention"}
    mlp = resolve_targets(model, ["all-linear"], attention=False, mlp=True)
    assert mlp.modules == ("mlp.c_fc", "mlp.c_proj")
    with pytest.raises(TargetError, match="both are off"):
        resolve_targets(model, ["all-linear"], attention=False, mlp=False)
    moe = resolve_targets(family_model("qwen3_moe"), ["all-linear"], attention=False, mlp=True)
    assert moe.modules == () and moe.parameters == ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")
    assert build_lora_config(_request(lora_dropout=0.1), family_model("qwen3_moe")).lora_dropout == 0.0  # ParamWrapper


@pytest.mark.parametrize(
    ("family", "names", "missing", "offered"),
    [
        (
            "phi3",
            ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            "q_proj, k_proj, v_proj, gate_proj, up_proj",
            "qkv_proj",
        ),
        ("phi3", ["qkv_proj", "gate_proj", "down_proj"], "gate_proj", "gate_up_proj"),  # half of the fused MLP
        ("gpt2", ["q_proj", "v_proj"], "q_proj, v_proj", "c_attn"),
        ("falcon", ["query", "value"], "query, value", "query_key_value"),
    ],
)
def test_an_explicit_list_that_misses_is_refused_naming_what_the_model_has(family, names, missing, offered):
    with pytest.raises(TargetError) as refused:
        build_lora_config(_request(target_modules=names), family_model(family))
    text = str(refused.value)
    assert text.startswith(f"target_modules: {missing} matched nothing") and offered in text


def test_an_explicit_list_that_matches_is_passed_to_peft_as_it_is():
    config = build_lora_config(_request(target_modules=["qkv_proj", "lm_head"]), family_model("phi3"))
    assert sorted(config.target_modules) == ["lm_head", "qkv_proj"]


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_rows_are_kept_apart_or_the_batches_are_padded(family, tmp_path):
    """Two rows packed into one as TRL's padding-free collator does, through the attention the
    trainer uses: each row's logits equal those of the row alone, and the trainer's probe says so;
    where they do not (gpt-oss builds its masks without position_ids), the probe says that and the
    trainer pads its batches instead (and refuses ``packing``)."""
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    from trainer_core.training.config import build_sft_config
    from trainer_core.training.packed_rows import keeps_packed_rows_apart
    from trainer_core.training.trainer import use_training_attention

    model = family_model(family).eval()
    use_training_attention(model)
    rows = [{"input_ids": list(range(5, 17))}, {"input_ids": list(range(40, 49))}]
    batch = DataCollatorForLanguageModeling(pad_token_id=2, padding_free=True, return_position_ids=True)(rows)
    batch.pop("labels")
    with torch.no_grad():
        packed = model(**batch, use_cache=False).logits[0]
        alone = torch.cat([model(input_ids=torch.tensor([r["input_ids"]]), use_cache=False).logits[0] for r in rows])
    apart = torch.allclose(packed, alone, atol=1e-4, rtol=1e-4)
    assert apart == (family != "gpt_oss")  # the one family here whose masks ignore position_ids
    assert keeps_packed_rows_apart(model) == apart
    if not apart:
        request = _request(max_seq_length=64)
        assert build_sft_config(request, tmp_path, "cpu", False, rows_apart=False).padding_free is False
        with pytest.raises(ValueError, match="^packing: "):
            build_sft_config(request.model_copy(update={"packing": True}), tmp_path, "cpu", False, rows_apart=False)


@pytest.fixture(scope="module")
def family_models(tmp_path_factory, tiny_model_dir) -> Path:
    """A folder of tiny family models (phi3, gemma2, gpt2), built once for the tests below."""
    root = tmp_path_factory.mktemp("families")
    for family in ("phi3", "gemma2", "gpt2"):
        build_family_model(family, tiny_model_dir, root / family)
    return root


def test_check_and_start_name_the_attention_and_the_adapted_modules_and_refuse_a_miss(family_models, datasets_dir):
    from trainer_core.admission.admit import PreflightError, admit
    from trainer_core.preflight.check import run_preflight
    from trainer_core.settings import Settings
    from ui.refusals import describe

    settings = Settings(data_dir=family_models / "data", allowed_paths=f"{family_models}:{datasets_dir}")
    data = [str(datasets_dir / "alpaca_en_demo.json")]
    request = TrainingStartRequest(model_name=str(family_models / "phi3"), local_datasets=data, max_seq_length=64)
    report = run_preflight(request, settings, estimates=False)
    assert report.architecture == "Phi3ForCausalLM" and report.attention.startswith("sdpa") and not report.errors
    assert report.adapted_count == 8 and "self_attn.qkv_proj" in report.adapted_modules
    gemma = run_preflight(
        request.model_copy(update={"model_name": str(family_models / "gemma2")}), settings, estimates=False
    )
    assert gemma.attention.startswith("eager") and gemma.adapted_count == 14
    llama_names = request.model_copy(update={"target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]})
    errors = run_preflight(llama_names, settings, estimates=False).errors
    assert [e.code for e in errors] == ["lora_targets"] and "qkv_proj" in errors[0].message
    with pytest.raises(PreflightError) as refused:  # Start refuses it too, before any worker
        admit(llama_names, settings, None)
    assert str(refused.value).startswith("target_modules: q_proj, k_proj, v_proj matched nothing")
    assert describe(refused.value).fields == ("target_modules",)
    admit(request, settings, None)  # the defaults are admitted
    full = run_preflight(request.model_copy(update={"training_type": TrainingType.full}), settings, estimates=False)
    assert full.adapted_modules is None and full.adapted_count == 0


@pytest.mark.slow
def test_the_cli_trains_gpt2_with_its_conv1d_projections(family_models, datasets_dir, tmp_path):
    """The CLI door on a family with nothing Llama-like: GPT-2 (Conv1D c_attn / c_proj / c_fc)."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    out = tmp_path / "gpt2-run"
    done = subprocess.run(
        [sys.executable, "-m", "trainer_core", "train", "--dataset", str(datasets_dir / "alpaca_en_demo.json")]
        + ["--model-name", str(family_models / "gpt2"), "--max-steps", "2", "--batch-size", "2"]
        + ["--max-seq-length", "64", "--output-dir", str(out)],
        cwd=REPO,
        env=dict(os.environ, STUDIO_DATA_DIR=str(tmp_path / "data")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "completed" in done.stdout, done.stderr[-2000:]
    structure = json.loads((out / "run.json").read_text())["model_structure"]
    assert structure["adapted"]["modules"] == ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"]
    assert structure["adapted"]["count"] == 8 and structure["padding_free"] is True


def test_the_seed_use_lora_agrees_with_training_type_and_language_layers_stay_on():
    assert _request(use_lora=False).training_type == TrainingType.full
    assert _request(use_lora=True).training_type == TrainingType.lora
    assert _request(use_lora=True, training_type="qlora").training_type == TrainingType.qlora
    with pytest.raises(ValueError, match=r"use_lora \(false\) disagrees with training_type \(lora\)"):
        _request(use_lora=False, training_type="lora")
    with pytest.raises(TargetError, match="^finetune_language_layers: it is off"):
        build_lora_config(_request(finetune_language_layers=False), family_model("llama"))


def test_run_json_structure_of_a_model_without_block_lists_says_nothing_adapted():
    """A full fine-tune of a model whose layers are not in a ModuleList: run.json still gets its
    attention and padding, with no adapted list (instead of failing the run)."""
    from types import SimpleNamespace

    from trainer_core.training.worker import _structure

    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    model.config = SimpleNamespace(_attn_implementation="eager", num_hidden_layers=1)
    structure = _structure(SimpleNamespace(model=model, args=SimpleNamespace(padding_free=False)))
    assert structure == {"attention": "eager", "padding_free": False, "adapted": None}


# GGUF per family, with llama.cpp's converter 0.1.1 and transformers' GGUF reader as pinned:
# answers compared (read back by transformers), metadata only (llama.cpp runs them; transformers
# cannot load them back), or none refused: every family here is one the converter knows.
GGUF_ANSWERS = {"llama", "qwen2", "qwen3", "mistral", "gemma2", "phi3", "gpt2", "falcon", "starcoder2"}
GGUF_ANSWERS |= {"qwen3_moe", "gpt_oss"}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_exports_gguf_with_the_check_it_allows(family):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from tests.support.families import family_config
    from trainer_core.export.gguf_convert import gguf_problem, readable_back, supported_architectures
    from trainer_core.settings import get_settings

    folder = get_settings().gguf_converter_dir
    if not supported_architectures(folder):
        pytest.skip("the GGUF converter is not installed (bash scripts/setup.sh)")
    config = family_config(family).to_dict()
    config["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config["model_type"]]]
    assert gguf_problem(config, folder) is None
    assert readable_back(config) == (family in GGUF_ANSWERS)
    unknown = {**config, "architectures": ["NoSuchForCausalLM"]}
    assert "does not support the architecture NoSuchForCausalLM" in gguf_problem(unknown, folder)


@pytest.mark.slow
def test_a_gguf_that_transformers_cannot_read_back_is_checked_by_its_metadata(datasets_dir, tmp_path, capsys):
    """Phi-2: the CLI trains one step (its own process) and exports gguf-f16 (its ``main`` called
    here: the export is the point, not the process). transformers cannot read a Phi-2 GGUF back;
    llama.cpp runs it and compares its answers. Without llama.cpp the check reads the file's chat
    template and BOS / EOS and says that answers were not compared."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO
    from tests.support.cli_here import cli_main
    from trainer_core.export.gguf_convert import supported_architectures
    from trainer_core.llamacpp.build import missing_message
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.settings import get_settings

    if not supported_architectures(get_settings().gguf_converter_dir):
        pytest.skip("the GGUF converter is not installed (bash scripts/setup.sh)")
    env = {"STUDIO_DATA_DIR": str(tmp_path / "data"), "STUDIO_ALLOWED_PATHS": str(tmp_path)}
    # the real tokenizer's files, whose pre-tokenizer the converter recognises (SmolLM2's)
    real = materialize_default_model(get_settings().models_dir)
    base = build_family_model("phi", real, tmp_path / "phi")
    run = tmp_path / "run"
    trained = subprocess.run(
        [sys.executable, "-m", "trainer_core", "train", "--dataset", str(datasets_dir / "alpaca_en_demo.json"),
         "--model-name", str(base), "--max-steps", "1", "--batch-size", "2", "--max-seq-length", "64",
         "--output-dir", str(run)],
        cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    if not missing_message(get_settings().llama_cpp_dir):
        out = str(tmp_path / "gguf-llama")
        assert cli_main(["export", str(run), "--format", "gguf-f16", "--output", out], **env) == 0
        said = capsys.readouterr().out
        assert "check (llama.cpp) passed: f16 in llama.cpp: 3/3 prompts" in said and "MOSTLY_F16" in said, said
    env["STUDIO_LLAMA_CPP_DIR"] = str(tmp_path / "no-llama-cpp")
    assert cli_main(["export", str(run), "--format", "gguf-f16", "--output", str(tmp_path / "gguf")], **env) == 0
    said = capsys.readouterr().out
    assert "check (metadata) passed: f16: metadata checked (chat template, BOS/EOS); answers not compared" in said
    assert "llama.cpp is not built" in said
    (file,) = (tmp_path / "gguf").glob("*.gguf")
    assert file.read_bytes()[:4] == b"GGUF"
    assert cli_main(["export", str(run), "--format", "gguf-q4_k_m", "--output", str(tmp_path / "q4")], **env) == 2
    assert "bash scripts/setup.sh" in capsys.readouterr().err


@pytest.mark.slow
def test_a_moe_family_resumes_evaluates_and_trains_dpo_through_the_cli(family_models, datasets_dir, tmp_path):
    """Qwen3-MoE (experts adapted through target_parameters): 2 SFT steps with a checkpoint each,
    stopped after its first steps and resumed from its checkpoint for one more (the job runner, as
    the page and the API stop and resume), evaluated
    through the CLI (loss and answers, base and tuned), and 1 DPO step on preference pairs through
    the CLI: the doors a user takes after training, on a non-Llama layout."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    base = build_family_model("qwen3_moe", family_models, family_models / "qwen3_moe")
    env = dict(os.environ, STUDIO_DATA_DIR=str(tmp_path / "data"), STUDIO_ALLOWED_PATHS=str(family_models))

    def cli(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "-m", "trainer_core", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
        return done

    data = str(datasets_dir / "alpaca_en_demo.json")
    settings = dict(model_name=str(base), local_datasets=[data], batch_size=2, max_seq_length=64, learning_rate=1e-2)
    import time

    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.vocabulary import Phase

    store = RunStore(tmp_path / "studio.db")  # one history: resume finds the stopped run in it
    runner = JobRunner(runs_dir=tmp_path / "runs", store=store, warm_modules=())
    assert runner.start(TrainingStartRequest(**settings, max_steps=40, save_steps=1)).status == "queued"
    deadline = time.monotonic() + 300
    while not runner.status().metric_history.steps and time.monotonic() < deadline:
        time.sleep(0.2)
    assert runner.stop(save=True) and runner.wait(300)  # Stop: saves the step it reached
    stopped = runner.status()
    assert stopped.phase == Phase.stopped, stopped.message
    resumed = Path(stopped.details["output_dir"])
    checkpoint = max(resumed.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    step0 = int(checkpoint.name.split("-")[1])
    again = TrainingStartRequest(**settings, max_steps=step0 + 1, resume_from_checkpoint=str(checkpoint))
    assert runner.start(again).status == "queued" and runner.wait(300)
    assert runner.status().phase == Phase.completed, runner.status().message
    store.close()
    steps = [json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, step0 + 2)), steps  # continued after the checkpoint
    report = cli("evaluate", str(resumed), "--dataset", data, "--max-rows", "4", "--max-new-tokens", "8", "--json")
    scores = json.loads(report.stdout.strip().splitlines()[-1])
    assert scores["tuned"]["loss"] > 0 and scores["base"]["loss"] > 0 and scores["tuned"]["generated_tokens"], scores
    dpo = tmp_path / "dpo"
    cli(
        *("train", "--dataset", str(datasets_dir / "dpo_en_demo.json"), "--model-name", str(base)),
        *("--training-method", "dpo", "--batch-size", "2", "--max-seq-length", "64", "--max-steps", "1"),
        *("--output-dir", str(dpo)),
    )
    assert json.loads((dpo / "run.json").read_text())["model_structure"]["adapted"]["parameters"]
