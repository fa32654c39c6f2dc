"""The time a GRPO run spends sampling completions, estimated before it starts.

Each optimizer step samples ``batch_size x gradient_accumulation_steps`` completions (TRL's
generation batch, one ``generate`` call) token by token, ``max_completion_length`` decode steps at
most (a batch decodes until its longest completion ends, so the estimate takes the full length:
an upper bound that small models reach, since they rarely stop early). A decode step costs a fixed
``DECODE_STEP_SECONDS`` (the Python, cache and sampling work of one ``generate`` step, measured on
the default model on this CPU) plus the forward FLOPs of the batch (2 N per token, N the weights
each token passes, plus attention over the tokens so far) at ``DECODE_EFFICIENCY`` of the matmul
rate (one token per row: thin matmuls). Constants from bench/grpo_speed.py, docs/BENCHMARKS.md.
"""

from __future__ import annotations

from typing import Any

from trainer_core.preflight.parameters import count_parameters, shapes
from trainer_core.schemas import TrainingStartRequest

DECODE_STEP_SECONDS = {"cpu": 0.012, "cuda": 0.02}
DECODE_EFFICIENCY = {"cpu": 0.15, "cuda": 0.05}


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
    rate = gflops * 1e9 * DECODE_EFFICIENCY[kind]
    return total_steps * length * (DECODE_STEP_SECONDS[kind] + flops / rate)
