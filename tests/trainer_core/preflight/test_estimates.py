"""Pre-flight memory and time estimates (``trainer_core.preflight``): parameter counts against the
real model and PEFT, the activation count against autograd's saved tensors, and how each estimate
moves with the settings."""

from __future__ import annotations

import math
import time

import pytest
import torch
from transformers import LlamaConfig

from trainer_core.preflight import parameters, speed_probe, timing
from trainer_core.preflight.estimates import estimate_memory, estimate_time
from trainer_core.preflight.memory import activation_elements
from trainer_core.request.lora import LLAMA_PROJECTIONS
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.runs.store import RunRecord
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import Phase

# SmolLM2-135M-Instruct's config.json
SMOLLM2 = dict(
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    head_dim=64,
    vocab_size=49152,
    tie_word_embeddings=True,
)


def smol(**changes) -> LlamaConfig:
    return LlamaConfig(**{**SMOLLM2, **changes})


def request(**fields) -> TrainingStartRequest:
    return TrainingStartRequest(local_datasets=["train.json"], **fields)


# ----- parameter counts -----


@pytest.mark.slow
def test_counts_equal_the_real_model_and_peft(tiny_model_dir):
    """Total parameters equal the loaded model's; LoRA counts equal PEFT's for the seven
    projections and for all-linear."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert parameters.count_parameters(config, LLAMA_PROJECTIONS, 16, False).total == model.num_parameters()
    for targets, rank in ((LLAMA_PROJECTIONS, 16), (["all-linear"], 8), (["q_proj", "v_proj"], 4)):
        peft_model = get_peft_model(
            model,
            LoraConfig(
                r=rank, target_modules="all-linear" if targets == ["all-linear"] else targets, task_type="CAUSAL_LM"
            ),
        )
        trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
        assert parameters.count_parameters(config, targets, rank, True).lora == trainable, targets
        model = peft_model.unload()


def test_untied_head_and_biases_are_counted():
    tied = parameters.count_parameters(smol(), LLAMA_PROJECTIONS, 16, False).total
    assert (
        parameters.count_parameters(smol(tie_word_embeddings=False), LLAMA_PROJECTIONS, 16, False).total
        == tied + 49152 * 576
    )
    biased = parameters.count_parameters(smol(attention_bias=True), LLAMA_PROJECTIONS, 16, False).total
    assert biased - tied == 30 * (576 + 2 * 192 + 576)


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral", "gpt_oss"])
def test_mixture_of_experts_counts_every_expert_exactly(family):
    """Total and LoRA counts equal the tiny family model's and PEFT's (fused 3-D experts adapted
    through target_parameters), gpt-oss's biases and attention sinks included."""
    from peft import get_peft_model

    from tests.support.families import family_model
    from trainer_core.training.config import build_lora_config

    model = family_model(family)
    counts = parameters.count_parameters(model.config, ["all-linear"], 16, True)
    assert counts.total == sum(p.numel() for p in model.parameters())
    linear = sum(
        m.weight.numel() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and ".layers." in n
    )
    assert counts.block_linear == linear  # what QLoRA quantizes: the fused experts and routers are not nn.Linear
    peft_model = get_peft_model(model, build_lora_config(TrainingStartRequest(local_datasets=["d.json"]), model))
    assert counts.lora == sum(p.numel() for p in peft_model.parameters() if p.requires_grad)


def test_a_real_size_moe_weighs_all_its_experts_and_works_with_k_of_them():
    """Qwen3-30B-A3B's config.json (128 experts, 8 per token): 30.5 B parameters, 3.3 B active
    (Qwen's model card). The memory estimate holds every expert in the weights, also under QLoRA
    (the fused experts stay in the compute dtype), and the activations grow with k, not E."""
    from transformers import Qwen3MoeConfig

    config = Qwen3MoeConfig(
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        vocab_size=151936,
        tie_word_embeddings=False,
    )
    counts = parameters.count_parameters(config, ["all-linear"], 16, True)
    assert counts.total == pytest.approx(30.5e9, rel=0.01)
    assert counts.active_linear + 2 * 151936 * 2048 == pytest.approx(3.3e9, rel=0.02)
    request = TrainingStartRequest(local_datasets=["d.json"], training_type="qlora")
    memory = estimate_memory(request, config, 1024, "cpu")
    assert memory.parts_gib["weights"] > 0.9 * counts.total * 4 / 2**30 > 100
    fewer = estimate_memory(request, Qwen3MoeConfig(**{**config.to_dict(), "num_experts_per_tok": 1}), 1024, "cpu")
    assert fewer.parts_gib["weights"] == memory.parts_gib["weights"]
    assert memory.parts_gib["activations"] > 2 * fewer.parts_gib["activations"]
    assert timing.flops_per_token(request, config, 512) < 0.2 * 4 * counts.total  # k of E experts do the work


# ----- activations against autograd -----


@pytest.mark.parametrize("dropout", [0.05, 0.0])
def test_activation_count_equals_autograd_saved_tensors(dropout):
    """The values saved per token by one more decoder layer (a randomly initialised SmolLM2 of 2 vs
    1 layers, LoRA r16 on the seven projections, a padding-free batch of 4 rows through our loss)
    equal ``activation_elements``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer_core.training.attention import register_varlen_sdpa
    from trainer_core.training.trainer import answer_loss

    def saved_values(layers: int, tokens: int = 40) -> float:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(smol(num_hidden_layers=layers), attn_implementation="sdpa")
        model.set_attn_implementation(register_varlen_sdpa())
        model = get_peft_model(
            model, LoraConfig(r=16, lora_dropout=dropout, target_modules=LLAMA_PROJECTIONS, task_type="CAUSAL_LM")
        )
        model.train()
        ids = torch.randint(0, 49152, (1, tokens))
        labels = ids.clone()
        labels[0, : tokens // 2] = -100
        rows = tokens // 4
        inputs = {
            "input_ids": ids,
            "labels": labels,
            "position_ids": torch.arange(rows).repeat(4)[None],
            "cu_seq_lens_q": torch.arange(0, tokens + 1, rows, dtype=torch.int32),
        }
        weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
        storages: dict[int, int] = {}

        def pack(tensor):
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in weights:
                storages[storage.data_ptr()] = storage.nbytes()
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            answer_loss(model, inputs)
        return sum(storages.values()) / 4 / tokens  # fp32 values per token

    per_layer = saved_values(2) - saved_values(1)
    s = parameters.shapes(smol())
    assert per_layer == pytest.approx(activation_elements(s, request(lora_dropout=dropout), LLAMA_PROJECTIONS), abs=0.5)


# ----- memory estimate -----


def test_more_batch_tokens_need_more_memory():
    small = estimate_memory(request(), smol(), 512, "cpu", 256)
    large = estimate_memory(request(), smol(), 2048, "cpu", 1024)
    assert large.total_gib > small.total_gib
    assert large.parts_gib["activations"] == pytest.approx(4 * small.parts_gib["activations"], rel=1e-3)
    assert large.parts_gib["weights"] == small.parts_gib["weights"] == pytest.approx(134_515_008 * 4 / 2**30, abs=1e-3)
    assert math.isclose(small.total_gib, sum(small.parts_gib.values()), abs_tol=0.01)
    assert small.device == "cpu" and small.free_gib > 0 and "512 tokens (256 trained)" in small.basis


def test_methods_and_settings_move_the_estimate_the_right_way(monkeypatch):
    lora = estimate_memory(request(), smol(), 1024, "cpu")
    full = estimate_memory(request(training_type="full"), smol(), 1024, "cpu")
    assert (
        full.parts_gib["optimizer_state"] > 20 * lora.parts_gib["optimizer_state"] and full.total_gib > lora.total_gib
    )
    assert full.parts_gib["trainable_parameters"] == 0
    sgd = estimate_memory(request(training_type="full", optim="sgd"), smol(), 1024, "cpu")
    assert sgd.parts_gib["optimizer_state"] == 0
    checkpointed = estimate_memory(request(gradient_checkpointing=True), smol(), 1024, "cpu")
    assert checkpointed.parts_gib["activations"] < lora.parts_gib["activations"] / 5
    fewer = estimate_memory(request(target_modules=["q_proj", "v_proj"]), smol(), 1024, "cpu")
    assert fewer.parts_gib["activations"] < lora.parts_gib["activations"]
    trained_only = estimate_memory(request(), smol(), 1024, "cpu", 100)
    assert trained_only.parts_gib["logits"] == pytest.approx(lora.parts_gib["logits"] / 10.24, rel=1e-2)
    # On a bf16 GPU: half the bytes per weight, and 4-bit projections for QLoRA.
    monkeypatch.setattr("trainer_core.preflight.memory.dtype_bytes", lambda device: 2 if device == "cuda" else 4)
    monkeypatch.setattr("trainer_core.preflight.memory.free_memory_gib", lambda device: 80.0)
    cuda_lora = estimate_memory(request(), smol(), 1024, "cuda")
    cuda_qlora = estimate_memory(request(training_type="qlora"), smol(), 1024, "cuda")
    assert cuda_lora.parts_gib["weights"] == pytest.approx(lora.parts_gib["weights"] / 2, abs=1e-3)
    assert (
        cuda_qlora.parts_gib["weights"] < cuda_lora.parts_gib["weights"] / 2
        and cuda_qlora.total_gib < cuda_lora.total_gib
    )
    assert "NF4" in cuda_qlora.basis and cuda_qlora.free_gib == 80.0


# ----- time estimate -----


def run_record(
    model: str = DEFAULT_MODEL,
    method: str = "lora",
    tokens_per_second: float = 100.0,
    training_seconds: float = 60.0,
    wall_seconds: float = 80.0,
) -> RunRecord:
    now = time.time()
    return RunRecord(
        job_id=f"job_{tokens_per_second}",
        created_at=now - wall_seconds,
        finished_at=now,
        phase=Phase.completed,
        request={"model_name": model, "training_type": method},
        output_dir="/tmp/x",
        training_seconds=training_seconds,
        tokens_per_second=tokens_per_second,
    )


def test_time_uses_the_history_of_the_same_model_and_method(monkeypatch):
    monkeypatch.setattr(speed_probe, "cpu_load", lambda: (0.5, 2))
    history = [run_record(tokens_per_second=v) for v in (90.0, 100.0, 130.0)]
    history += [
        run_record(model="other/model", tokens_per_second=5.0),
        run_record(method="full", tokens_per_second=5.0),
        run_record(tokens_per_second=1.0, training_seconds=2.0),
    ]  # too short to count
    estimate = estimate_time(
        request(), smol(), 100_000, 250, 0, 0, "cpu", history, steps_per_epoch=250, tokenize_seconds=1.5
    )
    assert (
        estimate.tokens_per_second == 100.0
        and "history" in estimate.speed_source
        and "3 earlier" in estimate.speed_source
    )
    assert estimate.parts_seconds["train_steps"] == pytest.approx(1000.0, abs=0.1)
    assert estimate.parts_seconds["tokenize"] == 1.5
    fixed = estimate.total_seconds - 1000.0  # the range: the slowest and fastest of those runs' speeds
    assert estimate.low_seconds == pytest.approx(fixed + 1000.0 * 100 / 130, abs=0.5)
    assert estimate.high_seconds == pytest.approx(fixed + 1000.0 * 100 / 90, abs=0.5)
    # those runs spent 20 s outside training: startup is that less this run's tokenize and save
    assert estimate.parts_seconds["startup"] == pytest.approx(20.0 - 1.5 - estimate.parts_seconds["save"], abs=0.2)
    assert estimate.total_seconds == pytest.approx(sum(estimate.parts_seconds.values()), abs=0.5)


def steady(gflops: float, low: float = 0.0, high: float = 0.0) -> speed_probe.SpeedCache:
    """A speed cache whose probe always measures ``gflops`` (its runs from ``low`` to ``high``)."""
    return speed_probe.SpeedCache(
        lambda device: speed_probe.MachineSpeed(
            gflops=gflops, low_gflops=low or gflops, high_gflops=high or gflops, runs=5, measured_at=time.time()
        )
    )


def test_time_without_history_uses_the_measured_matmul_rate(monkeypatch):
    monkeypatch.setattr(speed_probe, "SPEEDS", steady(100.0))
    monkeypatch.setattr(speed_probe, "cpu_load", lambda: (0.5, 2))
    one_epoch = estimate_time(request(), smol(), 100_000, 250, 0, 0, "cpu", None, steps_per_epoch=250)
    per_token = timing.flops_per_token(request(), smol(), 100_000 / 1000)
    assert one_epoch.tokens_per_second == pytest.approx(100e9 * timing.EFFICIENCY["cpu"] / per_token, rel=1e-3)
    assert "100 GFLOP/s (median of 5 short runs" in one_epoch.speed_source
    assert one_epoch.low_seconds is None and one_epoch.load is None  # a steady probe, a quiet machine: a point
    half = estimate_time(request(max_steps=125), smol(), 100_000, 125, 0, 0, "cpu", [], steps_per_epoch=250)
    assert half.parts_seconds["train_steps"] == pytest.approx(one_epoch.parts_seconds["train_steps"] / 2, rel=0.01)
    with_eval = estimate_time(request(), smol(), 100_000, 250, 10_000, 5, "cpu", None, steps_per_epoch=250)
    assert 0 < with_eval.parts_seconds["evaluation"] < with_eval.parts_seconds["train_steps"]
    full = estimate_time(request(training_type="full"), smol(), 100_000, 250, 0, 0, "cpu", None, steps_per_epoch=250)
    assert full.parts_seconds["train_steps"] > one_epoch.parts_seconds["train_steps"]
    assert full.parts_seconds["save"] > one_epoch.parts_seconds["save"]


@pytest.mark.slow
def test_preflight_bench_quick(capsys, model_dir):
    """The benchmark end to end on one tiny run (figures are reported, not asserted)."""
    from bench import preflight

    report = preflight.main(["--quick"])
    (result,) = report["results"]
    assert result["run"]["peak_rss_gib"] > 1 and result["run"]["wall_seconds"] > result["run"]["training_seconds"] > 0
    assert result["memory_estimate"]["total_gib"] > 1 and result["time_estimate"]["total_seconds"] > 0
    assert "Start -> completed" in capsys.readouterr().out


def test_processes_on_the_cpu_each_hold_a_copy_and_on_gpus_the_estimate_is_per_gpu():
    one = estimate_memory(request(), smol(), 512, "cpu", 256)
    two = estimate_memory(request(num_processes=2), smol(), 512, "cpu", 256)
    assert two.total_gib == pytest.approx(2 * one.total_gib, abs=0.002) and "x 2 processes" in two.basis
    gpu_one = estimate_memory(request(), smol(), 512, "cuda", 256)
    gpu_two = estimate_memory(request(num_processes=2), smol(), 512, "cuda", 256)
    assert gpu_two.total_gib == gpu_one.total_gib and "per GPU" in gpu_two.basis
