"""The pre-flight's "will this run teach anything?" warnings: a run too short to learn its data, or
a learning rate too low to move the model in the steps it has (issue 12, 2b).

Two numbers describe how far a run can move a LoRA adapter:
- passes over the data = ``total_steps x batch_size x gradient_accumulation_steps / rows_kept``;
- the learning-rate budget = the sum of the scheduled learning rate over all optimizer steps
  (``learning_rate x total_steps x schedule_mean``; ``schedule_mean`` is the mean of the schedule's
  multiplier: 1 for constant, 1/2 for linear and cosine decay to 0, with the warm-up's share at 1/2;
  transformers ``get_scheduler``'s shapes).

Thresholds (measured by ``bench/defaults.py`` on the default model, LoRA r 16, the 91-row identity
file with its placeholders filled, 4 held-out "who are you" prompts; docs/BENCHMARKS.md "Defaults
that teach"; docs/bench-results/defaults.json):
- ``MIN_STEPS`` 60 and ``MIN_PASSES`` 3: a run is too short when it has fewer than 60 optimizer
  steps *and* fewer than 3 passes over its rows (the peers' recipes: Unsloth's 60 steps,
  LLaMA-Factory's 3 epochs). Measured: 1 epoch = 23 steps at 2e-4 named the new identity in 0 of
  4 answers (issue 12); 3 epochs = 69 steps named it in 4 of 4 at 2e-4 and at 1e-3.
- ``MIN_LR_BUDGET`` 0.01: LoRA runs whose budget is below it are warned that the learning rate is
  too low. Measured budgets (cosine, mean 1/2): 23 x 2e-4 / 2 = 0.0023 taught nothing;
  69 x 2e-4 / 2 = 0.0069 taught half (the name in 4 of 4 answers, the author in 0 of 4, held-out
  answer loss 3.17 -> 0.90 nats/token); 60 x 1e-3 / 2 = 0.03 (batch 8, issue 12) and
  69 x 1e-3 / 2 = 0.0345 taught the answers exactly (name and author 4 of 4, loss 0.46).
  0.01 lies between the half and the whole; where exactly in 0.007..0.03 was not measured.
Full fine-tuning moves every weight, so its usual rates are ~10x lower (``rules.LEARNING_RATES``);
the budget was not measured for it and is not checked.
"""

from __future__ import annotations

import math
from typing import Optional

from trainer_core.preflight.report import Issue
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingType

MIN_STEPS = 60
MIN_PASSES = 3
MIN_LR_BUDGET = 0.01
LORA_MAX_SUGGESTED_LR = 1e-3  # rules.LEARNING_RATES' upper end for LoRA / QLoRA
SCHEDULE_MEAN = {
    "constant": 1.0,
    "constant_with_warmup": 1.0,
    "linear": 0.5,
    "cosine": 0.5,
    "cosine_with_restarts": 0.5,
    "polynomial": 0.5,
}


def schedule_mean(request: TrainingStartRequest, total_steps: int) -> float:
    """Mean learning-rate multiplier over ``total_steps`` steps (0..1): the warm-up (``warmup_steps``
    or ``warmup_ratio`` of the steps) ramps linearly (mean 1/2), the rest follows
    ``lr_scheduler_type`` (SCHEDULE_MEAN; polynomial with transformers' default power 1)."""
    if total_steps <= 0:
        return 0.0
    warmup = request.warmup_steps if request.warmup_steps > 0 else math.ceil(request.warmup_ratio * total_steps)
    share = min(warmup, total_steps) / total_steps
    after = 1.0 if request.lr_scheduler_type == "constant_with_warmup" else SCHEDULE_MEAN[request.lr_scheduler_type]
    return share * 0.5 + (1 - share) * after


def lr_budget(request: TrainingStartRequest, total_steps: int) -> float:
    """Sum of the scheduled learning rate over the run: learning_rate x total_steps x schedule_mean."""
    return request.learning_rate * total_steps * schedule_mean(request, total_steps)


def _budget_steps(request: TrainingStartRequest, steps: int) -> int:
    """Steps that reach MIN_LR_BUDGET at the request's rate when it is already at
    LORA_MAX_SUGGESTED_LR or above (a higher rate is not suggested); 0 otherwise or for full."""
    if request.training_type == TrainingType.full or request.learning_rate < LORA_MAX_SUGGESTED_LR:
        return 0
    return math.ceil(MIN_LR_BUDGET / (request.learning_rate * max(schedule_mean(request, steps), 1e-9)))


def _steps_fix(request: TrainingStartRequest, steps_per_epoch: int) -> tuple[int, str, list[str]]:
    """(steps after the fix, the fix in words, fields): enough epochs (or max_steps) for MIN_STEPS
    steps or MIN_PASSES passes, whichever comes first, and for the learning-rate budget when the
    rate cannot be raised (``_budget_steps``)."""
    needed = min(MIN_STEPS, MIN_PASSES * steps_per_epoch)
    needed = max(needed, _budget_steps(request, needed))
    epochs = math.ceil(needed / steps_per_epoch)
    if request.max_steps > 0:
        return (
            needed,
            f"raise max_steps to {needed} (or set max_steps to 0 and num_epochs to {epochs})",
            ["max_steps", "num_epochs"],
        )
    return (
        epochs * steps_per_epoch,
        f"raise num_epochs to {epochs} (or set max_steps to {needed})",
        ["num_epochs", "max_steps"],
    )


def round_up(value: float) -> float:
    """``value`` (> 0) rounded up to one significant digit: 2.9e-4 -> 3e-4, 1.01e-3 -> 2e-3."""
    scale = 10.0 ** math.floor(math.log10(value))
    return float(f"{math.ceil(value / scale - 1e-9) * scale:.1g}")


def _budget_issue(request: TrainingStartRequest, steps: int, short: bool, run_steps: int) -> Optional[Issue]:
    """``learning_rate_too_low`` when the learning-rate budget over ``steps`` (the run's own
    ``run_steps``, or the count the ``run_too_short`` fix gives when ``short``) is below
    MIN_LR_BUDGET; the message states the run's own steps and sum first. When even
    LORA_MAX_SUGGESTED_LR would not reach it, the fix names more steps too (a ``run_too_short``
    about steps when the rate is already there and no such warning was given)."""
    budget, mean = lr_budget(request, steps), schedule_mean(request, steps)
    if budget >= MIN_LR_BUDGET or mean <= 0:
        return None
    needed = round_up(MIN_LR_BUDGET / (steps * mean))
    after_fix = f"; over the {steps} steps the fix above gives, {budget:.4f}" if steps != run_steps else ""
    said = (
        f"learning_rate={request.learning_rate:g} over {run_steps} steps ({request.lr_scheduler_type} schedule) sums "
        f"to {lr_budget(request, run_steps):.4f}{after_fix}, below the {MIN_LR_BUDGET:g} that moved the model in our "
        "measurements"
    )
    if needed <= LORA_MAX_SUGGESTED_LR:
        return Issue(
            level="warning",
            code="learning_rate_too_low",
            fields=["learning_rate"],
            message=f"{said}: the adapter will hardly change; raise learning_rate to {needed:g}",
        )
    rate = max(request.learning_rate, LORA_MAX_SUGGESTED_LR)
    more = math.ceil(MIN_LR_BUDGET / (rate * mean))
    if request.learning_rate >= LORA_MAX_SUGGESTED_LR:
        if short:
            return None  # the run_too_short warning's fix already counts these steps (_steps_fix)
        return Issue(
            level="warning",
            code="run_too_short",
            fields=["max_steps", "num_epochs"],
            message=f"{said}: too few steps to change the adapter; raise max_steps to {more} (more epochs)",
        )
    return Issue(
        level="warning",
        code="learning_rate_too_low",
        fields=["learning_rate", "max_steps"],
        message=f"{said}: the adapter will hardly change; raise learning_rate to {LORA_MAX_SUGGESTED_LR:g} and "
        f"max_steps to {more}",
    )


def training_budget_issues(request: TrainingStartRequest, total_steps: int, rows_kept: int) -> list[Issue]:
    """Warnings (``Issue`` level "warning") for a run that would hardly learn its data:
    ``run_too_short`` (fewer than MIN_STEPS steps and MIN_PASSES passes over ``rows_kept`` rows) and,
    for LoRA / QLoRA, ``learning_rate_too_low`` (learning-rate budget below MIN_LR_BUDGET, counted
    at the step count the first fix would give). Each message carries the fix. ``total_steps``:
    optimizer steps of the run (``steps.plan_steps``); ``rows_kept``: training rows after drops.
    Empty when there are no steps or rows (other checks report that)."""
    if total_steps <= 0 or rows_kept <= 0:
        return []
    issues: list[Issue] = []
    global_batch = request.batch_size * request.gradient_accumulation_steps
    steps_per_epoch = max(math.ceil(math.ceil(rows_kept / request.batch_size) / request.gradient_accumulation_steps), 1)
    passes = total_steps * global_batch / rows_kept
    steps, short = total_steps, total_steps < MIN_STEPS and passes < MIN_PASSES
    if short:
        steps, fix, fields = _steps_fix(request, steps_per_epoch)
        issues.append(
            Issue(
                level="warning",
                code="run_too_short",
                fields=fields,
                message=f"the run has {total_steps} optimizer steps, {passes:.1f} passes over its {rows_kept} rows: too short "
                f"to learn them (measured on a 91-row dataset: 23 steps, 1 pass, changed no answer); {fix}",
            )
        )
    if request.training_type != TrainingType.full and (budget := _budget_issue(request, steps, short, total_steps)):
        issues.append(budget)
    return issues
