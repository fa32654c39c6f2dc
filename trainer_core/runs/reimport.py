"""Rebuild the run history from the run folders: after a damaged ``studio.db`` was moved aside
(``integrity.HistoryUnreadable`` says how), every run folder still holds its ``run.json``
(``training.manifest``: the request without secrets, start and end times, why it ended, the best
checkpoint) and its ``metrics.jsonl`` (one ``TrainingProgress`` JSON object per logged step, written
by the worker). From them each run gets its history row and its steps back.

What does not come back: a run's name and note, an error's text (run.json keeps why a run ended,
not the message), and, for a resumed run, the training seconds added over earlier sessions (the
worker's ``metrics.jsonl`` counts each session from 0).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from trainer_core.runs.store import RunStore
from trainer_core.schemas import EndReason, Phase, TrainingProgress
from trainer_core.training.checkpoints import latest_checkpoint
from trainer_core.training.manifest import RUN_JSON, ManifestError, read_manifest

log = logging.getLogger(__name__)
METRICS_JSONL = "metrics.jsonl"
# run.json's end_reason -> the history's phase; a run.json without one was live when its app stopped
PHASE_OF_END = {
    EndReason.completed.value: Phase.completed,
    EndReason.early_stopped.value: Phase.completed,
    EndReason.stopped.value: Phase.stopped,
    EndReason.cancelled.value: Phase.stopped,
    EndReason.error.value: Phase.error,
    EndReason.interrupted.value: Phase.interrupted,
}
ERROR_NOT_KEPT = "this run ended in an error; its message was in the history that was lost (see the run folder's logs)"


@dataclass
class ImportReport:
    """What ``import_runs`` did: ``imported`` job ids, ``known`` ones already in the history, and
    ``skipped`` (folder, reason) pairs; ``bad_lines`` counts metrics lines that were not steps."""

    imported: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    bad_lines: int = 0

    def summary(self) -> str:
        """One line for a log or a terminal."""
        text = f"re-imported {len(self.imported)} runs ({len(self.known)} already in the history"
        if self.skipped:
            text += f"; {len(self.skipped)} folders skipped: " + "; ".join(f"{f}: {r}" for f, r in self.skipped[:5])
        if self.bad_lines:
            text += f"; {self.bad_lines} unreadable metrics lines left out"
        return text + ")"


def _timestamp(text: object) -> Optional[float]:
    """ISO 8601 (as ``manifest.utc_now`` writes it) as Unix seconds, or None."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _steps(path: Path, job_id: str, report: ImportReport) -> list[TrainingProgress]:
    """The logged steps in ``metrics.jsonl``; a resumed run's redone steps replace the old ones
    (the worker trims the file on resume, so repeats are rare)."""
    if not path.is_file() or path.is_symlink():
        return []
    steps: dict[tuple[int, bool], TrainingProgress] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                event = TrainingProgress.model_validate_json(line).model_copy(update={"job_id": job_id})
            except (ValidationError, ValueError):
                report.bad_lines += 1
                continue
            steps[(event.step, event.eval_loss is not None)] = event
    return sorted(steps.values(), key=lambda e: (e.step, e.eval_loss is not None))


def import_run(store: RunStore, folder: Path, report: ImportReport) -> None:
    """Add the run in ``folder`` (holding ``run.json``) to ``store`` with its steps, unless the
    history knows its job id. Records the outcome in ``report``; never raises for a bad folder."""
    manifest_path = folder / RUN_JSON
    if manifest_path.is_symlink():
        report.skipped.append((str(folder), "run.json is a link"))
        return
    try:
        data = read_manifest(manifest_path)
    except ManifestError as exc:
        report.skipped.append((str(folder), str(exc)[:200]))
        return
    job_id = data.get("job_id")
    if not isinstance(job_id, str) or not job_id.strip() or not isinstance(data["request"], dict):
        report.skipped.append((str(folder), "run.json has no job_id"))
        return
    if store.get_record(job_id) is not None:
        report.known.append(job_id)
        return
    reason = data.get("end_reason") if data.get("end_reason") in PHASE_OF_END else None
    phase = PHASE_OF_END[reason] if reason else Phase.interrupted
    created = _timestamp(data.get("started_at"))
    store.create_run(job_id, data["request"], str(folder), Phase.training.value, created_at=created)
    for event in _steps(folder / METRICS_JSONL, job_id, report):
        store.add_metric(event)
    checkpoint = latest_checkpoint(folder)
    best = data.get("best_checkpoint") if isinstance(data.get("best_checkpoint"), str) else None
    best_loss = (data.get("final_metrics") or {}).get("best_eval_loss") if best else None
    store.finish_run(
        job_id,
        phase.value,
        ERROR_NOT_KEPT if phase is Phase.error else None,
        str(checkpoint) if checkpoint else None,
        (reason or EndReason.interrupted.value),
        best_checkpoint=best,
        best_eval_loss=best_loss if isinstance(best_loss, (int, float)) else None,
        finished_at=_timestamp(data.get("ended_at")) or created,
    )
    report.imported.append(job_id)


def import_runs(store: RunStore, runs_dir: Path) -> ImportReport:
    """Re-import every run folder directly under ``runs_dir`` (the studio's runs folder: the caller
    has checked it) that holds a ``run.json`` and is not in the history yet. Links are not followed.
    Returns an ImportReport."""
    report = ImportReport()
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return report
    for folder in sorted(runs_dir.iterdir()):
        if folder.is_symlink() or not folder.is_dir() or not (folder / RUN_JSON).exists():
            continue
        try:
            import_run(store, folder, report)
        except (OSError, json.JSONDecodeError) as exc:
            report.skipped.append((str(folder), f"{type(exc).__name__}: {exc}"[:200]))
    log.info("%s from %s", report.summary(), runs_dir)
    return report
