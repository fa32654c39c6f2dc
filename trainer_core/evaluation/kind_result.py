"""What a model kind's own evaluation (``ModelKind.evaluation``: speech-to-text, text-to-speech,
embedding) writes when it is done, in one place: its ``predictions.jsonl`` table, the
``EvaluationResult`` (with the note when the base model itself was the choice) and ``scores.json``."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer_core.evaluation.report import SCORES_FILE, write_atomic, write_predictions
from trainer_core.evaluation.schemas import EvaluationResult, Scores

log = logging.getLogger(__name__)
BASE_ITSELF = "the base model itself was evaluated (its scores are under tuned)"


def write_result(
    context: dict[str, Any],
    table: list[dict],
    scores: dict[str, Scores],
    *,
    available: int,
    began: float,
    device: str,
    notes: Sequence[str] = (),
    label: str = "model",
) -> EvaluationResult:
    """Write ``table`` (one object per evaluated row) to ``predictions.jsonl`` and the result to
    ``scores.json`` in ``context["output_dir"]`` (the evaluation worker's context: ``choice`` the
    evaluated ``ModelChoice`` as a dict, ``data`` the plan with its ``source``); returns the result.
    ``scores``: ``tuned`` and, when compared, ``base``; ``available``: rows the data held;
    ``began``: the evaluation's ``time.monotonic()``; ``label``: the kind's words for the log."""
    choice, folder = context["choice"], Path(context["output_dir"])
    notes = [*notes, *([BASE_ITSELF] if choice["kind"] == "base" else [])]
    write_predictions(folder, table)
    result = EvaluationResult(
        rows_evaluated=len(table),
        rows_available=available,
        tuned=scores["tuned"],
        base=scores.get("base"),
        seconds=round(time.monotonic() - began, 2),
        source=context["data"]["source"],
        device=device,
        notes=notes,
    )
    write_atomic(folder / SCORES_FILE, result.model_dump_json(indent=2))
    log.info("evaluated %s %s on %d rows in %.1f s: %s", label, choice["id"], len(table), result.seconds, result.tuned)
    return result
