"""Padding-free batches with per-row attention and the answer-only loss give the padded batch's
loss and gradients (tiny random Llama, so it runs in seconds)."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from trainer_core.attention import register_varlen_sdpa
from trainer_core.config import build_sft_config
from trainer_core.schemas import TrainingStartRequest
from trainer_core.trainer import answer_loss

PAD = 0


TINY = dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)


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
    assert args.padding_free and args.max_length is None and not args.bf16
    packed = build_sft_config(request.model_copy(update={"packing": True}), tmp_path, "cpu", has_eval=False)
    assert packed.max_length == 128


def test_fused_adamw_on_cuda_only():
    from trainer_core.config import optimizer_for

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
        packed, _ = answer_loss(model(register_varlen_sdpa()),
                                DataCollatorForLanguageModeling(pad_token_id=PAD, padding_free=True)(rows))
    assert packed.item() == pytest.approx(padded.item(), abs=1e-5)


def test_no_dense_mask_is_built_for_full_attention_models():
    from trainer_core.attention import varlen_mask

    config = _model("sdpa").config
    assert varlen_mask(batch_size=1, q_length=8, kv_length=8, config=config, attention_mask=None) is None
    padded = varlen_mask(batch_size=1, q_length=3, kv_length=3, config=config, attention_mask=torch.ones(1, 3, dtype=torch.bool))
    assert padded is None or padded.shape[-1] == 3  # a padding mask still goes through sdpa_mask
