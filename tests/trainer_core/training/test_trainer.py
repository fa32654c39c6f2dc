"""Padding-free batches with per-row attention and the answer-only loss give the padded batch's
loss and gradients; checkpoints appear whole; a diverged run stops and never saves NaN weights
(tiny random Llama, so it runs in seconds)."""

import math
from types import SimpleNamespace

import datasets
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, TrainerCallback
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.attention import register_varlen_sdpa
from trainer_core.training.config import build_sft_config
from trainer_core.training.divergence import DivergenceGuard
from trainer_core.training.safe_saves import DivergenceError
from trainer_core.training.trainer import LeanSFTTrainer, answer_loss, build_trainer

PAD = 0


TINY = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def _model(attn: str, config_class=LlamaConfig, model_class=LlamaForCausalLM, **extra):
    """A tiny randomly initialised causal LM (same weights for every ``attn``)."""
    torch.manual_seed(0)
    model = model_class(config_class(**TINY, **extra)).eval()
    model.set_attn_implementation(attn)
    return model


def _rows() -> list[dict]:
    gen = torch.Generator().manual_seed(1)
    rows = []
    for length, prompt in ((17, 5), (9, 3), (31, 12), (4, 1)):
        ids = torch.randint(1, 97, (length,), generator=gen).tolist()
        rows.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]})
    return rows


def _grads(model) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def test_packed_varlen_loss_and_grads_equal_padded():
    rows = _rows()
    padded_model = _model("sdpa")
    padded = DataCollatorForLanguageModeling(pad_token_id=PAD)(rows)
    reference = padded_model(**padded, use_cache=False).loss
    reference.backward()

    packed_model = _model(register_varlen_sdpa())
    packed = DataCollatorForLanguageModeling(pad_token_id=PAD, padding_free=True)(rows)
    assert packed["input_ids"].shape == (1, sum(len(r["input_ids"]) for r in rows))  # no padding at all
    loss, outputs = answer_loss(packed_model, packed)
    loss.backward()

    trained = sum(sum(label != -100 for label in r["labels"][1:]) for r in rows)
    assert outputs.logits.shape == (1, trained, 97)  # the LM head ran only where a label follows
    assert loss.item() == pytest.approx(reference.item(), abs=1e-5)
    assert torch.allclose(_grads(packed_model), _grads(padded_model), atol=1e-5)


def test_answer_loss_divides_by_the_accumulated_token_count():
    rows = _rows()
    packed = DataCollatorForLanguageModeling(pad_token_id=PAD, padding_free=True)(rows)
    model = _model(register_varlen_sdpa())
    mean, _ = answer_loss(model, packed)
    total, _ = answer_loss(model, packed, num_items_in_batch=torch.tensor(1))
    count = sum(sum(label != -100 for label in r["labels"][1:]) for r in rows)
    assert total.item() == pytest.approx(mean.item() * count, rel=1e-5)


def test_varlen_attention_without_offsets_is_plain_causal_sdpa():
    ids = torch.randint(1, 97, (2, 11), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ours = _model(register_varlen_sdpa())(input_ids=ids, use_cache=False).logits
        stock = _model("sdpa")(input_ids=ids, use_cache=False).logits
    assert torch.allclose(ours, stock, atol=1e-5)


def test_sft_config_is_padding_free(tmp_path):
    request = TrainingStartRequest(local_datasets=["x.json"], max_seq_length=128)
    args = build_sft_config(request, tmp_path, "cpu", has_eval=False)
    assert args.padding_free and args.max_length is None
    # bf16 autocast exactly where models.precision chooses it (tests/trainer_core/models/test_precision.py)
    from trainer_core.models.precision import request_precision

    assert args.bf16 == (request_precision(request, "cpu").dtype == "bf16")
    fp32 = build_sft_config(request.model_copy(update={"mixed_precision": "no"}), tmp_path, "cpu", has_eval=False)
    assert not fp32.bf16
    assert args.logging_nan_inf_filter is False  # a NaN loss is logged as NaN, not hidden
    packed = build_sft_config(request.model_copy(update={"packing": True}), tmp_path, "cpu", has_eval=False)
    assert packed.max_length == 128


def test_fused_adamw_on_cuda_only():
    from trainer_core.training.config import optimizer_for

    assert optimizer_for("adamw_torch", "cuda") == "adamw_torch_fused"
    assert optimizer_for("adamw_torch", "cpu") == "adamw_torch"
    assert optimizer_for("sgd", "cuda") == "sgd"


def test_sliding_window_models_keep_their_window():
    """Mistral passes its window as an argument: the per-row path must not drop it."""
    from transformers import MistralConfig, MistralForCausalLM

    def model(attn):
        return _model(attn, MistralConfig, MistralForCausalLM, sliding_window=4)

    rows = _rows()
    with torch.no_grad():
        padded = model("sdpa")(**DataCollatorForLanguageModeling(pad_token_id=PAD)(rows), use_cache=False).loss
        packed, _ = answer_loss(
            model(register_varlen_sdpa()), DataCollatorForLanguageModeling(pad_token_id=PAD, padding_free=True)(rows)
        )
    assert packed.item() == pytest.approx(padded.item(), abs=1e-5)


def test_no_dense_mask_is_built_for_full_attention_models():
    from trainer_core.training.attention import varlen_mask

    config = _model("sdpa").config
    assert varlen_mask(batch_size=1, q_length=8, kv_length=8, config=config, attention_mask=None) is None
    padded = varlen_mask(
        batch_size=1, q_length=3, kv_length=3, config=config, attention_mask=torch.ones(1, 3, dtype=torch.bool)
    )
    assert padded is None or padded.shape[-1] == 3  # a padding mask still goes through sdpa_mask


# ----- saves and divergence (a tiny trainer: 2 steps of the tiny Llama with LoRA, ~1 s) -----
def _tiny_trainer(tokenizer, out, callbacks=(), **fields):
    fields = {"max_steps": 2, "save_steps": 1, "batch_size": 2, "learning_rate": 1e-3, "max_seq_length": 64, **fields}
    request = TrainingStartRequest(local_datasets=["x.json"], **fields)
    rows = datasets.Dataset.from_list(_rows())
    return build_trainer(request, _model("sdpa").train(), tokenizer, rows, None, out, "cpu", list(callbacks))


class _PoisonAfterFirstSave(TrainerCallback):
    """Sets one trained LoRA weight to NaN right after checkpoint-1 is saved, as a diverging step would."""

    def on_save(self, args, state, control, model=None, **kwargs):
        if state.global_step == 1:
            next(p for p in model.parameters() if p.requires_grad).data[0, 0] = float("nan")


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_checkpoints_are_written_in_a_staging_folder_and_renamed_whole(tokenizer, tmp_path, monkeypatch):
    published = []

    def publish(staged, target):
        published.append((staged.relative_to(tmp_path), (staged / "trainer_state.json").is_file(), target.exists()))
        trainer_module_publish(staged, target)

    from trainer_core.training import safe_saves

    trainer_module_publish = safe_saves.publish_folder
    monkeypatch.setattr(safe_saves, "publish_folder", publish)
    trainer = _tiny_trainer(tokenizer, tmp_path)
    trainer.train()
    trainer.save_final(tmp_path)
    # Each checkpoint was complete in its staging folder, and its final name did not exist before.
    assert [str(p[0]) for p in published] == [
        ".partial-checkpoint-1/checkpoint-1",
        ".partial-checkpoint-2/checkpoint-2",
    ]
    assert all(complete and not existed for _, complete, existed in published)
    assert not list(tmp_path.glob(".partial-*"))
    for step in (1, 2):
        assert {"adapter_model.safetensors", "optimizer.pt", "trainer_state.json"} <= set(
            _files(tmp_path / f"checkpoint-{step}")
        )
    assert (tmp_path / "adapter_model.safetensors").is_file() and (tmp_path / "tokenizer.json").is_file()


def test_a_nan_loss_ends_training_at_that_step(tokenizer, tmp_path):
    trainer = _tiny_trainer(tokenizer, tmp_path, [_PoisonAfterFirstSave()])
    with pytest.raises(DivergenceError, match=r"^Training diverged at step 2: loss is nan\. Lower learning_rate"):
        trainer.train()
    assert (tmp_path / "checkpoint-1" / "trainer_state.json").is_file()
    assert not (tmp_path / "checkpoint-2").exists() and not list(tmp_path.glob(".partial-*"))


@pytest.mark.parametrize("save_steps", [1, 0])
def test_without_the_guard_nan_weights_are_still_never_saved(tokenizer, tmp_path, save_steps):
    trainer = _tiny_trainer(
        tokenizer, tmp_path, [_PoisonAfterFirstSave()], stop_on_divergence=False, save_steps=save_steps
    )
    if save_steps:  # the step-2 checkpoint is refused
        with pytest.raises(DivergenceError, match="step 2: the trained weights hold NaN or inf values"):
            trainer.train()
        assert (tmp_path / "checkpoint-1" / "trainer_state.json").is_file()
    else:  # no checkpoint, so the callback never fires: poison the trained weights; the final save is refused
        trainer.train()
        next(p for p in trainer.model.parameters() if p.requires_grad).data[0, 0] = float("inf")
        with pytest.raises(DivergenceError, match="step 2: the trained weights hold NaN or inf values"):
            trainer.save_final(tmp_path)
    assert not (tmp_path / "checkpoint-2").exists() and not (tmp_path / "adapter_model.safetensors").exists()


def test_divergence_guard_names_the_step_and_the_value():
    guard, state = DivergenceGuard(), SimpleNamespace(global_step=4)
    guard.on_log(None, state, None, logs={"loss": 1.5, "grad_norm": 3.0, "learning_rate": 0.1})  # finite: no-op
    guard.on_log(None, state, None, logs={"train_runtime": 1.0})
    with pytest.raises(
        DivergenceError, match=r"^Training diverged at step 4: loss is nan\. .*max_grad_norm \(e\.g\. 1\.0\)"
    ):
        guard.on_log(None, state, None, logs={"loss": math.nan, "grad_norm": 3.0})
    with pytest.raises(DivergenceError, match="step 4: grad_norm is inf"):
        guard.on_log(None, state, None, logs={"loss": 2.0, "grad_norm": math.inf})


def test_finite_weight_check_names_a_bad_parameter():
    model = _model("sdpa")
    fake = SimpleNamespace(model=model, state=SimpleNamespace(global_step=7))
    LeanSFTTrainer.check_finite_weights(fake)  # all finite: no error
    model.model.layers[1].mlp.up_proj.weight.data[3, 3] = float("-inf")
    with pytest.raises(DivergenceError, match=r"step 7: .*first in model\.layers\.1\.mlp\.up_proj\.weight"):
        LeanSFTTrainer.check_finite_weights(fake)
    model.model.layers[1].mlp.up_proj.weight.requires_grad_(False)  # frozen weights are not trained or saved by us
    LeanSFTTrainer.check_finite_weights(fake)


def test_the_worker_reports_a_divergence_as_written():
    from trainer_core.training.failure_words import user_message as _user_message
    from trainer_core.training.safe_saves import divergence_message

    message = divergence_message(3, "grad_norm is nan")
    assert _user_message(DivergenceError(message)) == message
