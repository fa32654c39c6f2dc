"""Training the embeddings beside LoRA (``modules_to_save``) at their own rate
(``embedding_learning_rate``), and LoftQ's refusal off a GPU: the names are found in each family
(Llama's ``embed_tokens``; GPT-2's tied ``wte`` refused), a tied LM head stays tied to the trained copy, the
embedding weights move by the embedding rate, not the adapters' rate, and the merged export keeps
them (through the CLI, the door a user scripts)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.support.families import family_model
from trainer_core.models.targets import TargetError
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.config import build_lora_config


def _request(**fields) -> TrainingStartRequest:
    return TrainingStartRequest(model_name="m", local_datasets=["d.json"], **fields)


def _in_use(module):
    """The weight a forward uses: a PEFT ``ModulesToSaveWrapper``'s trained copy, or the module's own."""
    from peft.utils.other import ModulesToSaveWrapper

    if isinstance(module, ModulesToSaveWrapper):
        return module.modules_to_save["default"].weight
    return module.weight


def _tied_llama():
    import transformers as t

    config = t.LlamaConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=49152,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    return t.AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize(
    "build, names, tied",
    [
        (_tied_llama, ["embed_tokens"], True),
        (_tied_llama, ["embed_tokens", "lm_head"], True),
        (lambda: family_model("llama"), ["embed_tokens"], False),  # untied: only the input trains
        (lambda: family_model("llama"), ["embed_tokens", "lm_head"], False),
    ],
)
def test_saved_embeddings_train_and_a_tied_head_stays_tied(build, names, tied):
    from peft import get_peft_model

    model = build()
    peft_model = get_peft_model(model, build_lora_config(_request(modules_to_save=names), model))
    base = peft_model.get_base_model()
    given, out = _in_use(base.get_input_embeddings()), _in_use(base.get_output_embeddings())
    assert given.requires_grad
    if tied:
        assert given is out  # the LM head reads the trained copy
    else:
        assert (given is out) is False and out.requires_grad == ("lm_head" in names)


@pytest.mark.parametrize(
    "family, wrong, offered", [("gpt2", "embed_tokens", "transformer.wte"), ("llama", "wte", "model.embed_tokens")]
)
def test_a_name_the_model_lacks_is_refused_naming_its_embeddings(family, wrong, offered):
    model = family_model(family)
    with pytest.raises(TargetError, match=f"^modules_to_save: '{wrong}' matches no module") as refused:
        build_lora_config(_request(modules_to_save=[wrong]), model)
    assert f"{offered} (input embeddings)" in str(refused.value) and "lm_head (output layer)" in str(refused.value)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(training_type="full", modules_to_save=["lm_head"]), "clear modules_to_save"),
        (dict(embedding_learning_rate=1e-5), "list them in modules_to_save"),
        (dict(use_loftq=True), "choose training_type qlora"),
        (dict(modules_to_save=["lm_head"], embedding_learning_rate=1.5), "less than 1"),
    ],
)
def test_the_request_refuses_combinations_that_mean_nothing(fields, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        _request(**fields)
    _request(training_type="full", embedding_learning_rate=1e-5)  # full fine-tuning trains them anyway


@pytest.mark.parametrize("names", [["wte"], ["lm_head"], ["transformer.wte", "lm_head"]])
def test_a_tied_pair_peft_cannot_keep_tied_is_refused(names):
    """GPT-2 ties lm_head to ``transformer.wte``; PEFT re-ties a loaded adapter's copies only under
    the name embed_tokens, so the adapter would chat with the old LM head."""
    model = family_model("gpt2")
    with pytest.raises(TargetError, match="^modules_to_save: GPT2LMHeadModel ties its output layer") as refused:
        build_lora_config(_request(modules_to_save=names), model)
    assert "training_type full" in str(refused.value)
    build_lora_config(_request(modules_to_save=["ln_f"]), model)  # other modules are fine


def test_the_optimizer_gives_the_embeddings_their_own_rate():
    from peft import get_peft_model
    from transformers import Trainer, TrainingArguments

    from trainer_core.training.embedding_rate import EmbeddingRate

    model = _tied_llama()
    peft_model = get_peft_model(model, build_lora_config(_request(modules_to_save=["embed_tokens"]), model))
    trainer_type = type("RateTrainer", (EmbeddingRate, Trainer), {})
    args = TrainingArguments(output_dir="unused", learning_rate=1e-3, weight_decay=0.01, report_to=[], use_cpu=True)
    trainer = trainer_type(model=peft_model, args=args)
    trainer.embedding_learning_rate = 2e-5
    groups = trainer.create_optimizer().param_groups
    embedding = _in_use(peft_model.get_base_model().get_input_embeddings())
    rates = {group["lr"]: {id(p) for p in group["params"]} for group in groups}
    assert set(rates) == {1e-3, 2e-5} and rates[2e-5] == {id(embedding)}
    assert sum(len(group["params"]) for group in groups) == sum(p.requires_grad for p in peft_model.parameters())


def test_loftq_is_refused_by_the_check_on_a_cpu_machine(tiny_model_dir, tmp_path, datasets_dir):
    from trainer_core.admission.admit import PreflightError, admit
    from trainer_core.preflight.check import run_preflight
    from trainer_core.settings import Settings
    from trainer_core.training.loftq import apply_loftq, loftq_refusal
    from ui.refusals import describe

    settings = Settings(data_dir=tmp_path, allowed_paths=f"{tiny_model_dir.parent}:{datasets_dir}")
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        training_type="qlora",
        use_loftq=True,
    )
    errors = run_preflight(request, settings, estimates=False).errors
    assert [(e.code, e.fields) for e in errors if e.code == "loftq_device"] == [("loftq_device", ["use_loftq"])]
    with pytest.raises(PreflightError, match="^use_loftq: ") as refused:  # Start refuses it before any worker
        admit(request, settings, None)
    assert describe(refused.value).fields == ("use_loftq",)
    assert loftq_refusal("cuda") is None and "turn use_loftq off" in loftq_refusal("cpu")
    with pytest.raises(ValueError, match="^use_loftq: "):
        apply_loftq(object(), "cpu")


@pytest.mark.slow
def test_the_cli_trains_the_embeddings_at_their_rate_and_the_merged_export_keeps_them(
    tiny_model_dir, datasets_dir, tmp_path
):
    """The tiny SmolLM2 ties lm_head to embed_tokens: 2 steps with ``--modules-to-save embed_tokens``
    at learning_rate 1e-2 and embedding_learning_rate 1e-5. Adam moves a weight by about the rate
    per step, so the adapters move by ~1e-2 and the embeddings by at most ~2e-5; the merged model
    holds the trained embeddings, its LM head still tied to them, and its export check passes."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from tests.conftest import REPO

    out = tmp_path / "run"
    env = dict(os.environ, STUDIO_DATA_DIR=str(tmp_path / "data"), STUDIO_ALLOWED_PATHS=str(tiny_model_dir.parent))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "trainer_core", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    trained = cli(
        *("train", "--dataset", str(datasets_dir / "alpaca_en_demo.json"), "--model-name", str(tiny_model_dir)),
        *("--max-steps", "2", "--batch-size", "2", "--max-seq-length", "64", "--warmup-steps", "0"),
        *("--learning-rate", "1e-2", "--embedding-learning-rate", "1e-5", "--modules-to-save", "embed_tokens"),
        *("--output-dir", str(out)),
    )
    assert trained.returncode == 0 and "completed" in trained.stdout, trained.stderr[-2000:]
    adapter = load_file(str(out / "adapter_model.safetensors"))
    saved = [key for key in adapter if "embed_tokens" in key]
    assert saved == ["base_model.model.model.embed_tokens.weight"], saved
    before = load_file(str(tiny_model_dir / "model.safetensors"))["model.embed_tokens.weight"]
    moved = (adapter[saved[0]] - before).abs().max().item()
    assert 0 < moved < 3e-5, moved
    lora_b = max(v.abs().max().item() for k, v in adapter.items() if "lora_B" in k)
    assert lora_b > 1e-3, lora_b  # B starts at zero: the adapters moved at learning_rate

    exported = cli("export", str(out), "--format", "merged", "--dtype", "float32", "--output", str(tmp_path / "merged"))
    assert exported.returncode == 0, exported.stdout[-2000:] + exported.stderr[-2000:]
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert torch.equal(merged.model.embed_tokens.weight, adapter[saved[0]])
    assert merged.config.tie_word_embeddings and merged.lm_head.weight is merged.model.embed_tokens.weight
