"""The memory and time estimates of a model made of several stacks of layers (an audio encoder and
a text decoder, a backbone and a depth decoder, a frozen codec), for the kinds whose model is not
one decoder-only LM (``ModelKind.estimates``).

The kind describes each stack it runs (``Stack``: its layers, the values autograd saves per
position, the weights and attention a position passes) for the longest batch (memory) and for an
epoch (time), and its model's parameters are counted on the model built on the ``meta`` device
(``count_model``: no weights read; LoRA adapters matched as PEFT matches the run's own
``build_lora_config``). This module adds them up with the parts, constants and measured rates of
the text LM's estimates (``preflight.memory``, ``preflight.timing``): runtime, weights, adapters,
gradients, optimizer state, activations, logits and working buffers; startup, data, training steps
at the matmul rate measured now x ``EFFICIENCY``, evaluation and saves. Their accuracy against
measured runs: ``bench/audio_estimates.py`` (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

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
from trainer_core.preflight.steps import StepPlan
from trainer_core.preflight.timing import EFFICIENCY, TimeEstimate, machine_gflops, save_seconds, startup_seconds
from trainer_core.vocabulary import TrainingType

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stack:
    """One stack of layers as the estimates see it, over ``positions`` (the longest batch's for
    memory, an epoch's for time). ``saved``: values autograd keeps per position per layer while it
    trains; ``once``: values kept per position outside its layers (a final norm, an input every
    layer reads); ``matmul``: weights one position multiplies, all layers together (2 FLOPs each
    forward); ``attention``: query-key products per position, summed over its layers' attention
    blocks (width x positions attended; 4 FLOPs each forward); ``grad``: autograd records it (False:
    a part no gradient reaches, e.g. a frozen codec or a frozen front end below every adapter:
    forward FLOPs only, nothing saved)."""

    name: str
    layers: int
    hidden: int
    positions: int
    saved: int = 0
    once: int = 0
    matmul: int = 0
    attention: int = 0
    grad: bool = True

    def saved_values(self, checkpointing: bool) -> int:
        """Values autograd keeps for the backward pass (each layer's input alone plus one layer's
        saved values with gradient checkpointing)."""
        if not self.grad:
            return 0
        per_position = self.hidden * self.layers + self.saved if checkpointing else self.saved * self.layers
        return self.positions * (per_position + self.once)

    def flops(self, full: bool, training: bool = True) -> float:
        """Model FLOPs of its positions: forward 2 per weight and 4 per query-key product; training
        (where ``grad``) 4 (frozen weights) or 6 (``full``) per weight and 12 per product (PaLM's
        count, as ``timing.flops_per_token``)."""
        if not (training and self.grad):
            return self.positions * (2.0 * self.matmul + 4.0 * self.attention)
        return self.positions * ((6.0 if full else 4.0) * self.matmul + 12.0 * self.attention)


@dataclass(frozen=True)
class ModelCounts:
    """Parameters of a model as the run trains it: ``total`` (every weight held), ``trainable``
    (the LoRA adapters and ``modules_to_save``, or the whole model but its ``frozen`` parts),
    ``adapters`` (LoRA A + B, kept in fp32 by PEFT), ``factored`` (Adafactor's state values for the
    trainable ones: rows + columns of a matrix), ``quantized`` (the ``nn.Linear`` weights QLoRA
    holds in 4-bit) and ``adapted`` (module paths given adapters)."""

    total: int
    trainable: int
    adapters: int
    factored: int
    quantized: int
    adapted: tuple[str, ...] = ()


def _factored(shape: Sequence[int]) -> int:
    """Adafactor's state values for a parameter of ``shape``: rows + columns of a matrix, else all."""
    return shape[0] + shape[1] if len(shape) == 2 else math.prod(shape)


def count_model(model: Any, request: Any, frozen: tuple[str, ...] = ()) -> ModelCounts:
    """``ModelCounts`` of ``model`` (built on the ``meta`` device) trained as ``request``: LoRA
    adapters r x (in + out) on each ``nn.Linear`` the run's ``build_lora_config`` targets (PEFT's
    own matching), or a full fine-tune of every parameter outside the ``frozen`` module paths
    (e.g. a codec). Raises TargetError as the run would."""
    import torch
    from peft.tuners.tuners_utils import check_target_module_exists

    from trainer_core.training.config import build_lora_config

    params = dict(model.named_parameters())  # unique: a tied weight once
    total = sum(p.numel() for p in params.values())
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    skipped = {id(p) for p in output.parameters()} if output is not None else set()
    linear = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    quantized = sum(
        m.weight.numel() for name, m in linear if not name.startswith(frozen) and id(m.weight) not in skipped
    )
    if request.training_type == TrainingType.full:
        shapes = [tuple(p.shape) for name, p in params.items() if not name.startswith(frozen)]
        trainable = sum(math.prod(s) for s in shapes)
        return ModelCounts(total, trainable, 0, sum(map(_factored, shapes)), quantized)
    config = build_lora_config(request, model)
    adapted = tuple(name for name, _ in linear if check_target_module_exists(config, name))
    sizes = {name: (m.in_features, m.out_features) for name, m in linear}
    r = request.lora_r
    adapters = sum(r * (sizes[n][0] + sizes[n][1]) for n in adapted)
    shapes = [s for n in adapted for s in ((r, sizes[n][0]), (sizes[n][1], r))]
    saved = [p for name, p in params.items() if name.startswith(tuple(config.modules_to_save or ()))]
    extra = sum(p.numel() for p in saved) if config.modules_to_save else 0
    factored = sum(map(_factored, shapes)) + sum(_factored(tuple(p.shape)) for p in saved if config.modules_to_save)
    return ModelCounts(total, adapters + extra, adapters, factored, quantized, adapted)


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


def pretrained_config(folder: Optional[Path]) -> Optional[Any]:
    """The ``PretrainedConfig`` saved in ``folder`` (its ``config.json``, read by ``AutoConfig``
    from local files), or None where there is none or it cannot be read (logged)."""
    if folder is None or not (Path(folder) / "config.json").is_file():
        return None
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        log.info("no estimates for %s: %s", folder, exc)
        return None


def meta_model(config: Any, kind: Any) -> Any:
    """``kind``'s model (its ``model_class``) of ``config`` built on the ``meta`` device: every
    module and parameter shape, no memory taken, no weights read."""
    import torch

    with torch.device("meta"):
        return kind.model_class().from_config(config)


def layer_names(adapted: Sequence[str], layers: str) -> frozenset[str]:
    """The names inside one layer (e.g. ``self_attn.q_proj``) of the ``adapted`` module paths
    under the stack of layers at path ``layers`` (e.g. ``model.encoder.layers``)."""
    prefix = layers + "."
    return frozenset(path[len(prefix) :].split(".", 1)[1] for path in adapted if path.startswith(prefix))


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
