"""The pre-flight pieces a clip-per-row kind (speech-to-text, text-to-speech) shares: the method
refusal (such a model trains with sft only), a refusal met while reading its model or rows as the
check's error, and the report of its prepared splits (``data.audio_splits.ClipSplits``): rows,
tokens, steps, the kind's line and its memory and time estimates (``ModelKind.estimates``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.data.errors import DatasetError
from trainer_core.preflight.check import refused_report
from trainer_core.preflight.report import Issue, PreflightReport
from trainer_core.preflight.rules import data_error
from trainer_core.preflight.steps import plan_steps
from trainer_core.refusals import Refusal
from trainer_core.vocabulary import TrainingMethod


def sft_only(request: Any, label: str, rows: str, code: str) -> None:
    """Raise Refusal (fields ``training_method``, ``model_name``; ``code``) for a method other than
    sft: a ``label`` model (e.g. "speech-to-text") learns its ``rows`` (e.g. "(audio, transcript)"),
    not preferences or rewards."""
    if request.training_method != TrainingMethod.sft:
        raise Refusal(
            f"training_method {request.training_method.value}: {request.model_name} is a {label} model, "
            f"trained on {rows} rows with sft; choose sft, or pick a text model for this method",
            fields=("training_method", "model_name"),
            code=code,
        )


def read_error(exc: Exception) -> Issue:
    """The check's error of a refusal while reading the model or the rows: ``data_error`` for data,
    the Refusal's own code, else ``model_load`` (a ModelLoadError) naming ``model_name``."""
    if isinstance(exc, DatasetError):
        return data_error(exc)
    if isinstance(exc, Refusal):
        return Issue(level="error", code=exc.code, message=str(exc), fields=list(exc.fields))
    return Issue(level="error", code="model_load", message=str(exc), fields=["model_name"])


def splits_report(
    request: Any, data: Any, started: float, kind: Any, line: str, folder: Optional[Path]
) -> PreflightReport:
    """The report of ``data`` (``ClipSplits``; ``started``: the check's ``perf_counter``): rows
    read and kept, truncated rows, tokens, held-out rows, steps, ``line`` (field ``vision``: the
    model kind's line) and the memory and time estimates of ``kind`` (a ``ModelKind``: its
    ``estimates`` of the model in ``folder``), with their memory warning."""
    stats = data.stats
    plan = plan_steps(stats.rows, request)
    held = len(data.eval) if data.eval is not None else 0
    costs = {
        "no_estimates": f"no memory or time estimates for {kind.label} models",
        **kind.estimates(request, folder, data, plan),
    }
    warning = costs.pop("warning", None)
    return refused_report(request, [], started, warnings=[warning] if warning else []).model_copy(
        update=dict(
            **costs,
            rows_read=stats.rows + held,
            rows_kept=stats.rows,
            rows_truncated=stats.truncated_rows,
            rows_truncated_share=stats.truncated_rows / max(stats.rows, 1),
            tokens_total=stats.total_tokens,
            tokens_trained=stats.trained_tokens,
            eval_rows=held,
            steps_per_epoch=plan.steps_per_epoch,
            total_steps=plan.total_steps,
            epochs=plan.epochs,
            vision=line,
        )
    )
