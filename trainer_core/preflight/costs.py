"""The inputs of the memory and time estimates (``preflight.estimates``), taken from the check's
tokenized rows and step plan, the call into that module, and the report's fields of the two
(``report_fields``; ``lm_fields`` for a kind whose model is one LM read its own way)."""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np

from trainer_core.data.preview_tokenizer import local_model_folder
from trainer_core.preflight.gather import Gathered
from trainer_core.preflight.steps import StepPlan
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import TrainingMethod

log = logging.getLogger(__name__)

HISTORY_RUNS = 200  # recent runs whose measured speed the time estimate may use


def training_device() -> str:
    """ "cuda" when a GPU is visible (nvidia-smi, or torch if already imported), else "cpu": the
    worker's ``models.loading.pick_device`` without importing torch here."""
    from trainer_core.hardware import cached_snapshot

    return "cuda" if cached_snapshot().gpus else "cpu"


def longest_batch(found: Gathered, request: TrainingStartRequest) -> tuple[int, Optional[int]]:
    """(tokens, trained tokens) of the largest padding-free batch: the ``batch_size`` longest kept
    rows after truncation; with packing ``max_seq_length x batch_size`` tokens and the trained ones
    unknown (None)."""
    if request.packing:
        return request.max_seq_length * request.batch_size, None
    counts = found.train_counts
    kept = np.flatnonzero(counts.kept)
    longest = kept[np.argsort(-counts.cut[kept], kind="stable")[: request.batch_size]]  # (batch_size,) row indices
    return int(counts.cut[longest].sum()), int(counts.trained[longest].sum())


def evaluations(plan: StepPlan, request: TrainingStartRequest, has_eval: bool) -> int:
    """Evaluations in the run: one every ``eval_steps`` optimizer steps (``eval_strategy="steps"``)."""
    return plan.total_steps // request.eval_steps if has_eval else 0


def estimate_costs(
    request: TrainingStartRequest, settings: Settings, store: Optional[Any], found: Gathered, plan: StepPlan
) -> Optional[tuple[Any, Any]]:
    """(MemoryEstimate, TimeEstimate) for the request, or None when ``preflight.estimates`` is not
    installed, the model's config is not on this machine or its architecture cannot be counted
    (``parameters.UnsupportedModelError``, logged). The config is read with
    ``transformers.AutoConfig`` (``local_files_only``; no weights)."""
    try:
        from trainer_core.preflight.estimates import estimate_memory, estimate_time
    except ModuleNotFoundError as exc:
        if exc.name != "trainer_core.preflight.estimates":
            raise
        return None
    from transformers import AutoConfig

    from trainer_core.preflight.timing import sequences_per_row

    folder = local_model_folder(request.model_name, settings)
    if folder is None or found.train_counts is None:
        return None
    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    device = training_device()
    counts, eval_counts = found.train_counts, found.eval_counts
    sequences = sequences_per_row(request)  # a preference pair runs as two sequences; GRPO: num_generations
    answer = completion_budget(request)  # GRPO: the sampled completion after each prompt
    train_tokens = sequences * int(counts.cut[counts.kept].sum() + answer * counts.kept.sum())
    eval_tokens = (
        sequences * int(eval_counts.cut[eval_counts.kept].sum() + answer * eval_counts.kept.sum())
        if eval_counts is not None
        else 0
    )
    history = store.list_runs(limit=HISTORY_RUNS) if store is not None else None
    from trainer_core.preflight.parameters import UnsupportedModelError

    batch_tokens, batch_trained = longest_batch(found, request)
    if answer:  # a GRPO batch: batch_size completions of the longest prompts, each max_completion_length long
        batch_tokens, batch_trained = batch_tokens + request.batch_size * answer, request.batch_size * answer
    else:
        batch_tokens *= sequences
        batch_trained = batch_trained * sequences if batch_trained is not None else None
    try:
        memory = estimate_memory(request, config, batch_tokens, device, batch_trained)
    except UnsupportedModelError as exc:
        log.info("no estimates for %s: %s", request.model_name, exc)
        return None
    time_ = estimate_time(
        request,
        config,
        train_tokens,
        plan.total_steps,
        eval_tokens,
        evaluations(plan, request, found.eval is not None),
        device,
        history,
        steps_per_epoch=plan.steps_per_epoch,
        tokenize_seconds=found.tokenize_seconds,
        cache_dir=settings.data_dir,  # the machine's probed speed is kept there
    )
    return memory, time_


def lm_fields(
    request: TrainingStartRequest,
    folder: Any,
    batch: tuple[int, Optional[int]],
    epoch_tokens: int,
    eval_tokens: int,
    plan: StepPlan,
    has_eval: bool,
    lm_head: bool = True,
) -> dict[str, Any]:
    """The check report's estimate fields (``report_fields``) of a kind whose model is
    one LM but whose check reads its rows its own way (an embedder, an Orpheus-style Llama):
    ``estimate_memory`` of its longest ``batch`` (tokens, trained tokens or None) and
    ``estimate_time`` of ``epoch_tokens`` an epoch over ``plan``, at this machine's measured rate
    (the run history's speeds are of text runs); or ``no_estimates`` saying why not (no config in
    ``folder``, or ``parameters`` cannot count its architecture: logged)."""
    from trainer_core.preflight.estimates import estimate_memory, estimate_time
    from trainer_core.preflight.parameters import UnsupportedModelError
    from trainer_core.preflight.stacks import NOT_HERE, pretrained_config

    config = pretrained_config(folder)
    if config is None:
        return {"no_estimates": NOT_HERE}
    device = training_device()
    try:
        memory = estimate_memory(request, config, batch[0], device, batch[1], lm_head=lm_head)
        time_ = estimate_time(
            request,
            config,
            epoch_tokens,
            plan.total_steps,
            eval_tokens,
            evaluations(plan, request, has_eval),
            device,
            None,
            steps_per_epoch=plan.steps_per_epoch,
            lm_head=lm_head,
        )
    except UnsupportedModelError as exc:
        log.info("no estimates for %s: %s", folder, exc)
        return {"no_estimates": "its architecture cannot be counted"}
    return report_fields(memory, time_)


def report_fields(memory: Any, time_: Any) -> dict[str, Any]:
    """The check report's estimate fields of a ``MemoryEstimate`` and a ``TimeEstimate``
    (``ModelKind.estimates``), and the memory warning when the estimate is over the free memory."""
    from trainer_core.preflight import rules

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


def completion_budget(request: TrainingStartRequest) -> int:
    """Tokens sampled after each prompt (GRPO's ``max_completion_length``, the most a completion
    takes); 0 for the methods that train on the data's own answers."""
    return request.max_completion_length if request.training_method == TrainingMethod.grpo else 0


__all__ = [
    "completion_budget",
    "estimate_costs",
    "evaluations",
    "lm_fields",
    "longest_batch",
    "report_fields",
    "training_device",
]
