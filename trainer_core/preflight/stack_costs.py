"""The memory and time estimates of a model of several stacks (``preflight.stacks``): the parts,
constants and measured rates of the text LM's estimates (``preflight.memory``,
``preflight.timing``) added up over the stacks a kind describes: runtime, weights, adapters,
gradients, optimizer state, activations, logits and working buffers; startup, data, training steps
at the matmul rate measured now x ``EFFICIENCY``, evaluation and saves. Their accuracy against
measured runs: ``bench/audio_estimates.py`` (docs/BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trainer_core.preflight import rules
from trainer_core.preflight.memory import (
    GIB,
    LOGIT_COPIES,
    NF4_BYTES_PER_PARAM,
    RUNTIME_GIB,
    WORKING_SHARE,
    MemoryEstimate,
    dtype_bytes,
    free_memory_gib,
)
from trainer_core.preflight.stacks import ModelCounts, Stack
from trainer_core.preflight.steps import StepPlan
from trainer_core.preflight.timing import EFFICIENCY, TimeEstimate, machine_gflops, save_seconds, startup_seconds
from trainer_core.vocabulary import TrainingType


def _optimizer_bytes(request: Any, counts: ModelCounts, param_bytes: int) -> float:
    """AdamW's two moments per trainable parameter in its dtype, 8-bit AdamW 2 bytes, SGD none,
    Adafactor its factored second moments (fp32): as ``memory._optimizer_bytes``."""
    if request.optim == "sgd":
        return 0.0
    if request.optim in ("paged_adamw_8bit", "adamw_bnb_8bit"):
        return 2.0 * counts.trainable
    if request.optim == "adafactor":
        return 4.0 * counts.factored
    return 2.0 * param_bytes * counts.trainable


def memory_estimate(
    request: Any,
    counts: ModelCounts,
    stacks: Sequence[Stack],
    logits: int,
    device: str,
    batch: str,
    working_share: float = WORKING_SHARE,
) -> MemoryEstimate:
    """Estimated peak memory of training ``request`` on ``device`` with ``stacks`` over the longest
    batch (described in ``batch`` for the basis line) and ``logits`` output scores (positions x
    vocabulary, fp32) the loss holds; parts as ``memory.MemoryEstimate``, the working buffers
    ``working_share`` x the saved activations (the text LM's fitted share unless the kind measured
    its own). CPU processes of a DDP run each hold every part."""
    value = dtype_bytes(device)
    lora = request.training_type != TrainingType.full
    if request.training_type == TrainingType.qlora:
        weights = counts.quantized * NF4_BYTES_PER_PARAM + (counts.total - counts.quantized) * value
    else:
        weights = counts.total * value
    param_bytes = 4 if lora else value  # PEFT keeps adapters in fp32
    activations = value * sum(s.saved_values(request.gradient_checkpointing) for s in stacks)
    parts = {
        "runtime": RUNTIME_GIB["cuda" if device == "cuda" else "cpu"] * GIB,
        "weights": float(weights),
        "trainable_parameters": counts.adapters * 4.0,
        "gradients": counts.trainable * float(param_bytes),
        "optimizer_state": _optimizer_bytes(request, counts, param_bytes),
        "activations": float(activations),
        "logits": LOGIT_COPIES * 4.0 * logits,
        "working_buffers": working_share * activations,
    }
    copies = request.num_processes if device != "cuda" else 1
    precision = (
        "NF4 4-bit projections" if request.training_type == TrainingType.qlora else ("fp32" if value == 4 else "bf16")
    )
    runtime = "CPU runtime measured on this machine" if device != "cuda" else "CUDA context assumed (not measured)"
    basis = (
        f"{precision} weights on {device}, {request.training_type.value}, optimizer {request.optim}, longest batch "
        f"{batch}, gradient checkpointing {'on' if request.gradient_checkpointing else 'off'}; {runtime} "
        f"({parts['runtime'] / GIB:.2f} GiB)" + (f"; x {copies} processes (DDP)" if copies > 1 else "")
    )
    free = free_memory_gib(device)
    return MemoryEstimate(
        total_gib=round(copies * sum(parts.values()) / GIB, 3),
        parts_gib={name: round(copies * size / GIB, 3) for name, size in parts.items()},
        device=device,
        free_gib=None if free is None else round(free, 2),
        basis=basis,
    )


def time_estimate(
    request: Any,
    counts: ModelCounts,
    epoch: Sequence[Stack],
    epoch_tokens: int,
    plan: StepPlan,
    evaluation: Sequence[Stack],
    evaluations: int,
    device: str,
    data_seconds: float,
) -> TimeEstimate:
    """Estimated seconds from Start to completed: ``plan``'s steps over the ``epoch`` stacks (an
    epoch's positions; ``epoch_tokens`` the positions the speed is given in), ``evaluations`` forward
    passes over the ``evaluation`` stacks, at this machine's measured matmul rate x ``EFFICIENCY``;
    startup, ``data_seconds`` (reading the rows, as the check just did) and the saves as for text."""
    full = request.training_type == TrainingType.full
    rate, share = machine_gflops(device), EFFICIENCY["cuda" if device == "cuda" else "cpu"]
    flop_rate = rate * 1e9 * share
    passes = plan.total_steps / max(plan.steps_per_epoch, 1)
    train_seconds = passes * sum(s.flops(full) for s in epoch) / flop_rate
    trained_bytes = counts.adapters * 4.0 if not full else counts.trainable * dtype_bytes(device)
    checkpoints = plan.total_steps // request.save_steps if request.save_steps else 0
    parts = {
        "startup": startup_seconds(counts.total * dtype_bytes(device)),
        "tokenize": data_seconds,
        "train_steps": train_seconds,
        "evaluation": evaluations * sum(s.flops(full, training=False) for s in evaluation) / flop_rate,
        "save": save_seconds(trained_bytes, checkpoints),
    }
    speed = passes * epoch_tokens / max(train_seconds, 1e-9)
    flops_per_token = sum(s.flops(full) for s in epoch) / max(epoch_tokens, 1)
    source = (
        f"the {'bf16' if dtype_bytes(device) == 2 else 'fp32'} matmul rate measured on this machine (best sample, "
        f"{rate:.0f} GFLOP/s) x {share:.0%} over {flops_per_token / 1e9:.3g} GFLOP per position ({', '.join(s.name for s in epoch)})"
    )
    return TimeEstimate(
        total_seconds=round(sum(parts.values()), 1),
        parts_seconds={name: round(value, 1) for name, value in parts.items()},
        tokens_per_second=round(speed, 1),
        speed_source=source,
    )


def split_time(
    request: Any,
    counts: ModelCounts,
    data: Any,
    plan: StepPlan,
    stacks_of: Callable[[Any], Sequence[Stack]],
    epoch_tokens: int,
    device: str,
    data_seconds: float,
) -> TimeEstimate:
    """``time_estimate`` of a clip kind's prepared ``data`` (``data.audio_splits.ClipSplits``):
    ``plan``'s steps over its training split's stacks (``stacks_of(stats)``: the kind's stacks over
    a split's rows, given its ``ClipSplitStats``), and the evaluations of its held-out split."""
    from trainer_core.preflight.costs import evaluations

    held = data.eval_stats
    return time_estimate(
        request,
        counts,
        stacks_of(data.stats),
        epoch_tokens,
        plan,
        stacks_of(held) if held is not None else [],
        evaluations(plan, request, data.eval is not None),
        device,
        data_seconds,
    )


def report_fields(memory: MemoryEstimate, time_: TimeEstimate) -> dict[str, Any]:
    """The check report's estimate fields (``ModelKind.estimates``) and the memory warning when the
    estimate is over the free memory."""
    found: dict[str, Any] = {
        "no_estimates": None,
        "memory": memory,
        "time": time_,
        "memory_estimate_gib": round(memory.total_gib, 3),
        "time_estimate_seconds": round(time_.total_seconds, 1),
    }
    warning = rules.memory_over_free(memory.total_gib, memory.free_gib, memory.device)
    if warning:
        found["warning"] = warning
    return found
