"""Run time of a training run, Start to completed, estimated from this machine's measured speed.

Training speed (input tokens per training second), in order of preference:

1. this machine's run history: the median ``tokens_per_second`` of the latest ``HISTORY_RUNS``
   runs of the same model and method (``training_type``) that trained at least
   ``MIN_HISTORY_SECONDS``;
2. else the fp32 (CPU) / bf16 (CUDA) matmul rate of this machine (``speed_probe``: the median of
   short ``torch.mm`` runs, kept per machine in the data dir) times the share of it a training step reaches
   (``EFFICIENCY``: 0.52 for LoRA on this CPU, bench/throughput.py) over the model FLOPs per token
   (PaLM's count, Chowdhery et al. 2022 app. B: 6 N for full fine-tuning, 4 N with frozen weights,
   plus 12 L d n for attention over rows of n tokens).

Fixed parts: ``startup`` (worker start, imports, model load, building the trainer: bench/latency.py,
or what earlier runs of the same model spent outside training when the history has them),
``tokenize`` (measured by the caller, or ``TOKENIZE_TOKENS_PER_SECOND``), ``evaluation`` (forward
passes only: 2 N per token against 4 N / 6 N in training) and ``save`` (the final weights and every
checkpoint at ``DISK_BYTES_PER_SECOND``).

The estimate is a range as well as a point when its speed is unsure: the slowest and fastest of the
history's runs, or of the probe's runs when they spread over ``speed_probe.NOISY_SPREAD``; on a CPU
with more processes ready to run than cores the slow end is stretched by that ratio and the load named.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, Field

from trainer_core.preflight import speed_probe
from trainer_core.preflight.memory import dtype_bytes
from trainer_core.preflight.parameters import count_parameters, shapes
from trainer_core.preflight.speed_probe import MachineSpeed
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingMethod, TrainingType

log = logging.getLogger(__name__)

HISTORY_RUNS = 5
MIN_HISTORY_SECONDS = 10.0  # shorter runs are mostly their first step's warm-up
# Per trained input token, the no-grad forward passes a method adds: DPO scores both answers with the
# reference model; KTO scores with the reference and runs the KL batch through the model and the
# reference (TRL 1.16's DPOTrainer / KTOTrainer); ORPO has no reference model.
# GRPO: the reference model's pass when beta > 0 (TRL 1.16's GRPOTrainer; old-policy log-probabilities
# are recomputed only with num_iterations > 1, which the studio does not set).
EXTRA_FORWARDS = {
    TrainingMethod.sft: 0,
    TrainingMethod.dpo: 1,
    TrainingMethod.orpo: 0,
    TrainingMethod.kto: 2,
    TrainingMethod.grpo: 1,
}
# Sequences the trainer runs per data row: a pair is two (prompt + chosen, prompt + rejected).
SEQUENCES_PER_ROW = {TrainingMethod.sft: 1, TrainingMethod.dpo: 2, TrainingMethod.orpo: 2, TrainingMethod.kto: 1}


def sequences_per_row(request: TrainingStartRequest) -> int:
    """Sequences trained per data row: ``SEQUENCES_PER_ROW``, or GRPO's ``num_generations``
    completions per prompt."""
    if request.training_method == TrainingMethod.grpo:
        return request.num_generations
    return SEQUENCES_PER_ROW[request.training_method]


def extra_forwards(request: TrainingStartRequest) -> int:
    """No-grad forward passes per trained token the method adds (``EXTRA_FORWARDS``; GRPO without
    a KL term, ``beta`` 0, loads no reference model)."""
    if request.training_method == TrainingMethod.grpo and request.beta == 0:
        return 0
    return EXTRA_FORWARDS[request.training_method]


EFFICIENCY = {"cpu": 0.52, "cuda": 0.3}  # cpu: model FLOP/s / fp32 matmul rate, bench/throughput.py; cuda: assumed
IMPORT_SECONDS = 9.0  # spawning the worker and importing the training stack (bench/latency.py: ~8 s quiet)
LOAD_BYTES_PER_SECOND = 0.75e9  # model load from the OS file cache (bench/latency.py: 0.54 GB in 0.7 s)
BUILD_SECONDS = 1.2  # building the trainer (bench/latency.py)
TOKENIZE_TOKENS_PER_SECOND = 150_000.0  # chat-template render + fast tokenizer (999 alpaca rows in ~1.1 s)
DISK_BYTES_PER_SECOND = 0.3e9
SAVE_FIXED_SECONDS = 0.5  # tokenizer files, trainer state, renames


class TimeEstimate(BaseModel):
    """Estimated seconds from Start to completed, with its parts and the speed used."""

    total_seconds: float
    parts_seconds: dict[str, float] = Field(
        description="startup, tokenize, generation (GRPO's sampling), train_steps, evaluation, save."
    )
    tokens_per_second: float = Field(description="The training speed used (input tokens per training second).")
    speed_source: str = Field(description="Where that speed came from.")
    low_seconds: Optional[float] = Field(None, description="The range's fast end (None: a point estimate).")
    high_seconds: Optional[float] = Field(None, description="The range's slow end (None: a point estimate).")
    load: Optional[str] = Field(None, description="The machine's load when it is high, in words.")


def machine_speed(device: str, folder: Optional[Path] = None) -> MachineSpeed:
    """This machine's probed matmul rate (``speed_probe.SPEEDS``: kept in ``folder``, the data dir)."""
    return speed_probe.SPEEDS.speed(device, folder)


def machine_gflops(device: str, folder: Optional[Path] = None) -> float:
    """The median GFLOP/s of ``machine_speed``."""
    return machine_speed(device, folder).gflops


def flops_per_token(
    request: TrainingStartRequest, model_config: Any, row_tokens: float, training: bool = True, lm_head: bool = True
) -> float:
    """Model FLOPs per token: (6 N full / 4 N frozen weights; 2 N forward only) + (12 / 4) L d n,
    N = the weights every token passes (projections, a MoE model's k active experts, and the LM
    head unless ``lm_head`` is False: an embedder pools hidden states), n = tokens per row; in
    training plus the method's no-grad forward passes per token (``EXTRA_FORWARDS``: DPO's
    reference model, KTO's reference and KL passes, GRPO's reference)."""
    s = shapes(model_config)
    n_matmul = count_parameters(model_config, ["all-linear"], 1, False).active_linear + s.vocab * s.hidden * lm_head
    if not training:
        return 2.0 * n_matmul + 4.0 * s.layers * s.hidden * row_tokens
    factor = 6.0 if request.training_type == TrainingType.full else 4.0
    extra = extra_forwards(request) * (2.0 * n_matmul + 4.0 * s.layers * s.hidden * row_tokens)
    return factor * n_matmul + 12.0 * s.layers * s.hidden * row_tokens + extra


def early_eta(request: TrainingStartRequest, details: dict[str, Any], history: Optional[list[Any]]) -> Optional[float]:
    """Training seconds a run is expected to take before its own steps are timed, as the check
    estimates them: the tokens it will train (``details``' ``total_tokens`` per pass over its
    ``rows``, times the passes: ``num_epochs``, or ``max_steps`` x ``global_batch_size`` / rows) at
    the median speed of this machine's earlier runs of the same model and method
    (``history_speed``). None without such runs or without the token count."""
    measured = history_speed(request, history)
    tokens, rows = details.get("total_tokens"), details.get("rows")
    if measured is None or not tokens or not rows:
        return None
    batch = details.get("global_batch_size") or request.batch_size
    passes = request.max_steps * batch / rows if request.max_steps else request.num_epochs
    return float(tokens) * passes / measured[0]


def early_eta_logged(
    request: TrainingStartRequest, details: dict[str, Any], history: Callable[[], Optional[list[Any]]]
) -> Optional[float]:
    """``early_eta`` for a live job (``history`` read only when called): an estimate is a nicety, so
    any failure is logged and gives None; it never fails the job."""
    try:
        return early_eta(request, details, history())
    except Exception:  # noqa: BLE001 - the run goes on without an estimate
        log.exception("could not estimate the run's time from earlier runs")
        return None


def history_speed(
    request: TrainingStartRequest, history: Optional[list[Any]]
) -> Optional[tuple[float, float, str, tuple[float, float]]]:
    """(median tokens/s, median seconds outside training, source text, (slowest, fastest) tokens/s)
    from earlier runs of the same model, method and number of processes, or None when there are none."""
    same = [
        run
        for run in history or []
        if run.request.get("model_name") == request.model_name
        and run.request.get("training_type") == request.training_type.value
        and run.request.get("training_method", "sft") == request.training_method.value
        and run.request.get("num_processes", 1) == request.num_processes
        and run.tokens_per_second
        and (run.training_seconds or 0) >= MIN_HISTORY_SECONDS
    ]
    same = sorted(same, key=lambda run: run.created_at, reverse=True)[:HISTORY_RUNS]
    if not same:
        return None
    speeds = [run.tokens_per_second for run in same]
    overheads = [run.wall_seconds - run.training_seconds for run in same if run.wall_seconds is not None]
    source = (
        f"this machine's run history: median of {len(same)} earlier {request.training_type.value} run(s) of "
        f"{request.model_name} ({', '.join(f'{v:.0f}' for v in speeds)} tokens/s)"
    )
    overhead = statistics.median(overheads) if overheads else math.nan
    return statistics.median(speeds), overhead, source, (min(speeds), max(speeds))


def generation_part(
    request: TrainingStartRequest,
    model_config: Any,
    total_steps: int,
    device: str,
    from_history: bool,
    folder: Optional[Path] = None,
) -> dict[str, float]:
    """GRPO: ``{"generation": seconds}`` spent sampling completions (``preflight.generation``), when
    the speed is not from this machine's GRPO runs (whose tokens/s already include sampling); else {}."""
    if request.training_method != TrainingMethod.grpo or from_history:
        return {}
    from trainer_core.preflight.generation import generation_seconds

    return {
        "generation": generation_seconds(request, model_config, total_steps, device, machine_gflops(device, folder))
    }


def startup_seconds(weight_bytes: float) -> float:
    """Worker start and imports, loading ``weight_bytes`` of weights, building the trainer."""
    return IMPORT_SECONDS + weight_bytes / LOAD_BYTES_PER_SECOND + BUILD_SECONDS


def save_seconds(trained_bytes: float, checkpoints: int) -> float:
    """The final save of ``trained_bytes`` (weights or adapter) plus ``checkpoints`` saves of them
    with their optimizer state."""
    final = SAVE_FIXED_SECONDS + trained_bytes / DISK_BYTES_PER_SECOND
    return final + checkpoints * (SAVE_FIXED_SECONDS + 3 * trained_bytes / DISK_BYTES_PER_SECOND)


def _save_seconds(request: TrainingStartRequest, model_config: Any, total_steps: int, device: str) -> float:
    """Final save plus the checkpoints at ``save_steps`` (weights or adapter, and optimizer state)."""
    counts = count_parameters(
        model_config, list(request.target_modules), request.lora_r, request.training_type != TrainingType.full
    )
    trained_bytes = (
        counts.lora * 4.0 if request.training_type != TrainingType.full else counts.total * dtype_bytes(device)
    )
    return save_seconds(trained_bytes, total_steps // request.save_steps if request.save_steps else 0)


def _trained_tokens(
    request: TrainingStartRequest, tokens_per_epoch: int, total_steps: int, steps_per_epoch: Optional[int]
) -> float:
    """Input tokens the run trains on: ``total_steps`` of ``steps_per_epoch``, or ``num_epochs``
    epochs when ``steps_per_epoch`` is not given (logged as a guess when ``max_steps`` is set)."""
    if steps_per_epoch:
        return tokens_per_epoch * total_steps / steps_per_epoch
    if request.max_steps:
        log.warning(
            "estimate_time without steps_per_epoch: max_steps=%d taken as num_epochs=%s",
            request.max_steps,
            request.num_epochs,
        )
    return tokens_per_epoch * request.num_epochs


def estimate_time(
    request: TrainingStartRequest,
    model_config: Any,
    train_tokens_per_epoch: int,
    total_steps: int,
    eval_tokens: int,
    evaluations: int,
    device: str,
    history: Optional[list[Any]],
    steps_per_epoch: Optional[int] = None,
    tokenize_seconds: Optional[float] = None,
    lm_head: bool = True,
    cache_dir: Optional[Path] = None,
) -> TimeEstimate:
    """Estimated seconds from Start to completed for ``request`` on ``device``.

    ``train_tokens_per_epoch``: input tokens of the training rows after truncation; ``total_steps``
    optimizer steps of ``steps_per_epoch`` each (None: the run is taken as ``num_epochs`` epochs,
    which is right unless ``max_steps`` is set); ``eval_tokens`` tokens per evaluation, run
    ``evaluations`` times; ``history``: ``runs.store.RunRecord`` list of this machine (None: none);
    ``tokenize_seconds``: what tokenizing the rows took the caller (None: estimated); ``lm_head``:
    False for a model that runs no LM head (an embedder); ``cache_dir``: where the machine's probed
    speed is kept (the data dir; None: in this process only)."""
    train_tokens = _trained_tokens(request, train_tokens_per_epoch, total_steps, steps_per_epoch)
    row_tokens = train_tokens / max(total_steps * request.batch_size * request.gradient_accumulation_steps, 1)
    per_token = flops_per_token(request, model_config, row_tokens, lm_head=lm_head)
    weight_bytes = count_parameters(model_config, [], 1, False).total * dtype_bytes(device)
    startup = startup_seconds(weight_bytes)
    tokenize = tokenize_seconds
    if tokenize is None:
        tokenize = (train_tokens_per_epoch + eval_tokens) / TOKENIZE_TOKENS_PER_SECOND
    save = _save_seconds(request, model_config, total_steps, device)
    measured = history_speed(request, history)
    if measured is not None:
        speed, overhead, source, (slowest, fastest) = measured
        if not math.isnan(overhead):  # what those runs spent outside training, less this run's tokenize and save
            startup = max(overhead - tokenize - save, BUILD_SECONDS)
        spread = (speed / fastest, speed / slowest)  # time factors of the range's fast and slow ends
    else:
        probed, share = machine_speed(device, cache_dir), EFFICIENCY["cuda" if device == "cuda" else "cpu"]
        speed = probed.gflops * 1e9 * share / per_token
        source = (
            f"the {'bf16' if dtype_bytes(device) == 2 else 'fp32'} matmul rate of this machine, {probed.described()}, "
            f"x {share:.0%} over {per_token / 1e9:.2f} GFLOP per token (no earlier run of this model and method here)"
        )
        spread = (probed.gflops / probed.high_gflops, probed.gflops / probed.low_gflops) if probed.noisy else (1, 1)
    eval_speed = speed * per_token / flops_per_token(request, model_config, row_tokens, training=False, lm_head=lm_head)
    parts = {
        "startup": startup,
        "tokenize": tokenize,
        **generation_part(request, model_config, total_steps, device, measured is not None, cache_dir),
        "train_steps": train_tokens / speed,
        "evaluation": evaluations * eval_tokens / eval_speed,
        "save": save,
    }
    load, cores = speed_probe.cpu_load() if device != "cuda" else (0.0, 1)
    busy = speed_probe.busy_words(load, cores)
    low, high = speed_probe.time_range(parts, spread[0], spread[1] * (load / cores if busy else 1.0))
    return TimeEstimate(
        total_seconds=round(sum(parts.values()), 1),
        parts_seconds={name: round(value, 1) for name, value in parts.items()},
        tokens_per_second=round(speed, 1),
        speed_source=source,
        low_seconds=low,
        high_seconds=high,
        load=busy,
    )
