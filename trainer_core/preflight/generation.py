"""The time a GRPO run spends sampling completions, estimated before it starts.

Each optimizer step samples ``batch_size x gradient_accumulation_steps`` completions (TRL's
generation batch, one ``generate`` call) token by token, ``max_completion_length`` decode steps at
most (a batch decodes until its longest completion ends, so the estimate takes the full length:
an upper bound that small models reach, since they rarely stop early). A decode step costs a fixed
time per decoder layer, whatever the batch (the Python, kernel-launch, cache and sampling work of
one ``generate`` step: ``DECODE_LAYER_SECONDS``, more with LoRA's unmerged adapters on every
projection), plus the forward FLOPs of the batch (2 N per token, N the weights each token passes,
plus attention over the tokens so far) at ``DECODE_EFFICIENCY`` of the measured matmul rate (one
token per row: thin matmuls; LoRA's extra thin matmuls and dropout copies halve it).

Measured on 2026-12-06 (AMD EPYC, 2 cores, the default model's 30 layers, a 47-token prompt, 32
tokens sampled, ``model.generate`` timed at batch 8 and 16 to separate the two parts; the matmul
rate 191 GFLOP/s): LoRA r16 on the seven projections (as GRPO trains it) 0.17 s a decode step at
batch 8 and 0.25 at 16, i.e. 0.09 s fixed (3.0 ms a layer) and 10 ms a row (efficiency 0.14);
without adapters 0.11 and 0.15 s, i.e. 0.07 s fixed (2.3 ms a layer) and 5 ms a row (0.28). Checked
against ``python -m bench.grpo`` (10 steps, batch 8): see docs/BENCHMARKS.md, "GRPO". The CUDA
values are not measured here (no GPU on this machine): a GPU's decode step is launch-bound.
"""

from __future__ import annotations

from typing import Any

from trainer_core.preflight.parameters import count_parameters, shapes
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingType

# seconds per decoder layer per decode step, whatever the batch: (adapters, no adapters)
DECODE_LAYER_SECONDS = {"cpu": (0.0030, 0.0023), "cuda": (0.0008, 0.0006)}
# share of the matmul rate a decode step's FLOPs get: (adapters, no adapters)
DECODE_EFFICIENCY = {"cpu": (0.14, 0.28), "cuda": (0.05, 0.05)}


def generation_seconds(
    request: TrainingStartRequest, model_config: Any, total_steps: int, device: str, gflops: float
) -> float:
    """Seconds the run's ``total_steps`` spend in ``generate`` (see the module), at ``gflops``, the
    matmul rate measured on this machine (``timing.machine_gflops``)."""
    s = shapes(model_config)
    n_matmul = count_parameters(model_config, ["all-linear"], 1, False).active_linear + s.vocab * s.hidden
    batch = request.batch_size * request.gradient_accumulation_steps
    length = request.max_completion_length
    context = request.max_seq_length / 4 + length / 2  # a typical prompt plus half the answer, attended to
    flops = batch * (2.0 * n_matmul + 4.0 * s.layers * s.hidden * context)
    kind = "cuda" if device == "cuda" else "cpu"
    plain = int(request.training_type == TrainingType.full)  # the tables' second value: no adapters
    fixed = s.layers * DECODE_LAYER_SECONDS[kind][plain]
    rate = gflops * 1e9 * DECODE_EFFICIENCY[kind][plain]
    return total_steps * length * (fixed + flops / rate)
