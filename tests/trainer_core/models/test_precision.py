"""bf16 mixed precision (``models.precision``): the choice per device, CPU and method, the cached
probe, and the numbers: a bf16 LoRA run of a tiny model matches the fp32 one in loss and gradients."""

import json

import datasets
import pytest
import torch

from trainer_core.models import precision
from trainer_core.models.precision import CpuRates, choose_precision
from trainer_core.schemas import TrainingStartRequest


def _rates(fp32: float, bf16: float, attention_fp32: float = 1.0, attention_bf16: float = 1.8) -> CpuRates:
    return CpuRates(
        cpu="Test CPU",
        flags=["avx512_bf16"],
        fp32_gflops=fp32,
        bf16_gflops=bf16,
        attention_fp32_ms=attention_fp32,
        attention_bf16_ms=attention_bf16,
    )


@pytest.mark.parametrize(
    "rates, training_type, method, asked, dtype, weights",
    [
        (_rates(180, 400), "lora", "sft", "auto", "bf16", "bf16"),  # AVX512-BF16: 2.2x
        (_rates(342, 1305), "qlora", "sft", "auto", "bf16", "bf16"),  # AMX
        (_rates(180, 400), "full", "sft", "auto", "bf16", "fp32"),  # full: fp32 master weights under autocast
        (_rates(177, 0.3), "lora", "sft", "auto", "fp32", "fp32"),  # emulated bf16: slow, fp32 kept
        (None, "lora", "sft", "auto", "fp32", "fp32"),  # no bf16 flag
        (_rates(180, 400), "lora", "dpo", "auto", "fp32", "fp32"),  # log-prob ratios: fp32 unless asked
        (_rates(180, 400), "lora", "grpo", "bf16", "bf16", "bf16"),
        (None, "lora", "sft", "bf16", "bf16", "bf16"),  # asked for: honoured, however slow
        (_rates(342, 1305), "lora", "sft", "no", "fp32", "fp32"),
    ],
)
def test_the_choice_follows_the_measured_rates_and_the_setting(
    monkeypatch, rates, training_type, method, asked, dtype, weights
):
    monkeypatch.setattr(precision, "cpu_rates", lambda cache=None: rates)
    chosen = choose_precision("cpu", asked, training_type, method)
    assert (chosen.dtype, chosen.weights) == (dtype, weights)
    assert chosen.reason
    if rates is not None and asked == "auto" and method == "sft":
        assert f"{rates.bf16_gflops:.0f} vs fp32 {rates.fp32_gflops:.0f} GFLOP/s" in chosen.reason


def test_the_probe_runs_once_per_cpu_and_is_cached(tmp_path, monkeypatch):
    calls = []

    def fake_run(*args, **kwargs):
        calls.append(args)
        return type("Done", (), {"stdout": json.dumps([200.0, 450.0, 1.0, 0.6]) + "\n"})()

    monkeypatch.setattr(precision, "cpu_name_and_flags", lambda: ("Test CPU", ["amx_bf16"]))
    monkeypatch.setattr(precision.subprocess, "run", fake_run)
    cache = tmp_path / "precision_cache.json"
    first = precision.cpu_rates(cache)
    second = precision.cpu_rates(cache)
    assert first == second and first.fast_bf16 and not first.fp32_attention and len(calls) == 1
    assert "Test CPU|amx_bf16|torch" in next(iter(json.loads(cache.read_text())))
    cache.write_text("not json")  # a broken cache is measured again, not an error
    assert precision.cpu_rates(cache) == first and len(calls) == 2


def test_a_cpu_without_bf16_flags_is_never_probed(monkeypatch, tmp_path):
    monkeypatch.setattr(precision, "cpu_name_and_flags", lambda: ("Old CPU", []))
    monkeypatch.setattr(precision.subprocess, "run", lambda *a, **k: pytest.fail("probed"))
    assert precision.cpu_rates(tmp_path / "cache.json") is None


def test_the_real_probe_reports_both_rates():
    fp32, bf16, attention_fp32, attention_bf16 = precision.probe_rates(size=128, seconds=0.05)
    assert fp32 > 0 and bf16 > 0 and attention_fp32 > 0 and attention_bf16 > 0


def test_attention_stays_fp32_where_bf16_attention_measured_slower(monkeypatch):
    monkeypatch.setattr(precision, "cpu_rates", lambda cache=None: _rates(180, 400, 1.0, 1.8))
    slow = choose_precision("cpu")
    assert (slow.dtype, slow.attention) == (
        "bf16",
        "fp32",
    ) and "attention in fp32 (bf16 1.80 vs fp32 1.00 ms)" in slow.reason
    monkeypatch.setattr(precision, "cpu_rates", lambda cache=None: _rates(342, 1305, 1.0, 0.4))  # AMX
    assert choose_precision("cpu").attention == "bf16"


def test_fp32_attention_in_a_bf16_run_matches_and_gives_bf16_back():
    """``sdpa_varlen`` with fp32 attention on: bf16 inputs under autocast give a bf16 output equal to
    the fp32 attention of the same inputs, and gradients reach the inputs."""
    from types import SimpleNamespace

    from trainer_core.training import attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 20, 16, generator=gen).bfloat16().requires_grad_() for _ in range(3))
    cu = torch.tensor([0, 7, 20], dtype=torch.int32)
    module = SimpleNamespace(is_causal=True, training=True)
    try:
        attention.register_varlen_sdpa(fp32=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = attention.varlen_sdpa_forward(module, q, k, v, None, cu_seq_lens_q=cu)
        out.float().sum().backward()
    finally:
        attention.register_varlen_sdpa(fp32=False)
    reference, _ = attention.varlen_sdpa_forward(module, q.float(), k.float(), v.float(), None, cu_seq_lens_q=cu)
    assert out.dtype == torch.bfloat16 and q.grad is not None and q.grad.dtype == torch.bfloat16
    assert torch.allclose(out.float(), reference.bfloat16().float())


# ----- the numbers: bf16 mixed precision against fp32 on a tiny model -----


def _run(tiny_model_dir, tmp_path, mixed_precision: str, steps: int = 8) -> tuple[list[float], object]:
    from transformers import TrainerCallback

    from trainer_core.models import loading
    from trainer_core.training.trainer import build_trainer

    class Losses(TrainerCallback):
        values: list = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                self.values.append(logs["loss"])

    request = TrainingStartRequest(
        local_datasets=["x.json"],
        max_steps=steps,
        batch_size=2,
        learning_rate=1e-2,
        max_seq_length=64,
        lora_dropout=0.0,
        mixed_precision=mixed_precision,
        save_steps=0,
    )
    gen = torch.Generator().manual_seed(1)
    rows = []
    vocab = torch.tensor([11, 57, 203, 404, 512, 777, 901, 999])  # few tokens: a pattern 8 steps can learn
    for length, prompt in ((17, 5), (9, 3), (31, 12), (24, 6)) * 4:
        ids = vocab[torch.randint(0, 8, (length,), generator=gen)].tolist()
        rows.append({"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]})
    tokenizer = loading.load_tokenizer(tiny_model_dir)
    model = loading.load_model(tiny_model_dir, request, "cpu")
    losses = Losses()
    losses.values = []
    trainer = build_trainer(
        request, model, tokenizer, datasets.Dataset.from_list(rows), None, tmp_path / mixed_precision, "cpu", [losses]
    )
    trainer.train()
    return losses.values, trainer


def test_bf16_mixed_precision_trains_as_fp32_does(tiny_model_dir, tmp_path):
    fp32, plain = _run(tiny_model_dir, tmp_path, "no")
    bf16, mixed = _run(tiny_model_dir, tmp_path, "bf16")
    assert not plain.args.bf16 and mixed.args.bf16  # autocast on for the bf16 run only
    base = mixed.model.get_base_model()
    assert base.model.layers[0].self_attn.q_proj.base_layer.weight.dtype == torch.bfloat16  # frozen base in bf16
    trained = [p for p in mixed.model.parameters() if p.requires_grad]
    assert trained and all(p.dtype == torch.float32 for p in trained)  # fp32 master weights
    assert len(bf16) == len(fp32) == 8
    assert max(abs(a - b) for a, b in zip(bf16, fp32)) < 0.02, (bf16, fp32)
    assert min(fp32[3:]) < fp32[0] - 0.2  # it learns, so equal losses mean something


def test_bf16_gradients_match_fp32(tiny_model_dir):
    """One step's LoRA gradients under bf16 autocast with bf16 base weights against fp32:
    the same direction (cosine > 0.99) and size (within 5 %)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer_core.training.trainer import answer_loss

    ids = torch.randint(5, 1000, (1, 40), generator=torch.Generator().manual_seed(2))
    labels = ids.clone()
    labels[0, :10] = -100
    grads = {}
    for dtype in (torch.float32, torch.bfloat16):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=dtype)
        model = get_peft_model(
            model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
        )
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            loss, _ = answer_loss(model, {"input_ids": ids, "labels": labels})
        loss.backward()
        grads[dtype] = torch.cat([p.grad.float().flatten() for p in model.parameters() if p.requires_grad])
    a, b = grads[torch.float32], grads[torch.bfloat16]
    assert torch.nn.functional.cosine_similarity(a, b, dim=0) > 0.99
    assert abs(b.norm() / a.norm() - 1) < 0.05


def test_run_json_and_the_check_say_which_precision(monkeypatch):
    from trainer_core.preflight.check import precision_summary

    monkeypatch.setattr(precision, "cpu_rates", lambda cache=None: _rates(180, 400))
    monkeypatch.setattr("trainer_core.preflight.costs.training_device", lambda: "cpu")
    line = precision_summary(TrainingStartRequest(local_datasets=["x.json"]))
    assert line.startswith("bf16 mixed precision: bf16 matmul 400 vs fp32 180 GFLOP/s")
    line = precision_summary(TrainingStartRequest(local_datasets=["x.json"], mixed_precision="no"))
    assert line.startswith("fp32: mixed_precision is no")


def test_a_bf16_chat_model_keeps_its_adapter_unmerged_and_its_base_exact(tiny_model_dir):
    """Serving in bf16 (``compute_dtype`` without a request, on a CPU whose bf16 units pay): the
    tuned answers come from the adapter unmerged, so switching tuned / base never rounds the base
    weights; in fp32 the adapter is merged for the tuned answers, as before."""
    from pathlib import Path

    from peft import LoraConfig, get_peft_model
    from peft.tuners.tuners_utils import BaseTunerLayer
    from transformers import AutoModelForCausalLM

    from trainer_core.serving.loader import LoadedModel
    from trainer_core.serving.schemas import ModelChoice

    ids = torch.tensor([[5, 17, 99, 230, 7]])
    choice = ModelChoice(id="job", label="job", kind="final", base_model="tiny", path="x", adapter=True)
    for dtype, merges in ((torch.bfloat16, False), (torch.float32, True)):
        torch.manual_seed(0)
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=dtype)
        model = get_peft_model(base, LoraConfig(r=8, target_modules="all-linear", init_lora_weights=False)).eval()
        loaded = LoadedModel(choice, model, None, "cpu", Path("."), 64, 0.0)
        frozen = {name: p.detach().clone() for name, p in model.named_parameters() if "base_layer" in name}
        with torch.no_grad():
            for _ in range(3):
                with loaded.weights(True) as m:
                    tuned = m(ids).logits
                    merged = any(getattr(x, "merged", False) for x in m.modules() if isinstance(x, BaseTunerLayer))
                with loaded.weights(False) as m:
                    plain = m(ids).logits
        assert merged == merges
        assert not torch.allclose(tuned, plain)  # the adapter is applied for the tuned answers
        if dtype == torch.bfloat16:
            assert all(torch.equal(frozen[n], p) for n, p in model.named_parameters() if n in frozen)


def test_modules_to_save_start_from_the_exact_weights(monkeypatch):
    """Trained copies of whole modules (``modules_to_save``) start from fp32 weights, not bf16-rounded
    ones: such a run loads its weights in fp32 and still computes in bf16."""
    from trainer_core.models.precision import request_precision

    monkeypatch.setattr(precision, "cpu_rates", lambda cache=None: _rates(180, 400))
    plain = request_precision(TrainingStartRequest(local_datasets=["x.json"]), "cpu")
    saved = request_precision(TrainingStartRequest(local_datasets=["x.json"], modules_to_save=["embed_tokens"]), "cpu")
    assert (plain.dtype, plain.weights) == ("bf16", "bf16")
    assert (saved.dtype, saved.weights) == ("bf16", "fp32") and "modules_to_save" in saved.reason
