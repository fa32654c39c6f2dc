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
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from trainer_core.runs.store import RunStore
from trainer_core.status import TrainingProgress
from trainer_core.training.checkpoints import latest_checkpoint
from trainer_core.training.manifest import RUN_JSON, ManifestError, read_manifest
from trainer_core.vocabulary import EndReason, Phase

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
    except (ValueError, OverflowError, OSError):
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


SQLITE_MAX_INT = 2**63 - 1


def _fits_sqlite(event: TrainingProgress) -> bool:
    """Whether every integer of ``event`` fits SQLite's INTEGER (a hand-edited file may not)."""
    return all(not isinstance(v, int) or abs(v) <= SQLITE_MAX_INT for v in event.model_dump().values())


def _plan(folder: Path, data: dict, report: ImportReport) -> tuple:
    """The validated values of one run, before anything is written. Raises ValueError naming the
    first key that is not what a run writes."""
    job_id = data.get("job_id")
    if not isinstance(job_id, str) or not job_id.strip() or len(job_id) > 200:
        raise ValueError("run.json has no usable job_id")
    job_id.encode("utf-8")  # lone surrogates: UnicodeEncodeError, a ValueError
    if not isinstance(data["request"], dict):
        raise ValueError("run.json's request is not an object")
    reason = data.get("end_reason")
    if reason is not None and (not isinstance(reason, str) or reason not in PHASE_OF_END):
        raise ValueError("run.json's end_reason is not one a run writes")
    metrics = data.get("final_metrics")
    if metrics is not None and not isinstance(metrics, dict):
        raise ValueError("run.json's final_metrics is not an object")
    best = data.get("best_checkpoint")
    if best is not None and not isinstance(best, str):
        raise ValueError("run.json's best_checkpoint is not text")
    best_loss = (metrics or {}).get("best_eval_loss") if best else None
    best_loss = float(best_loss) if isinstance(best_loss, (int, float)) and not isinstance(best_loss, bool) else None
    steps = [e for e in _steps(folder / METRICS_JSONL, job_id, report) if _fits_sqlite(e)]
    json.dumps(data["request"], allow_nan=True)  # storable as it is stored (create_run dumps it)
    return job_id, reason, best, best_loss, steps


def import_run(store: RunStore, folder: Path, report: ImportReport) -> None:
    """Add the run in ``folder`` (holding ``run.json``) to ``store`` with its steps, unless the
    history knows its job id. Every value is checked before the first write, and a write that fails
    anyway removes the run again, so a bad folder is skipped whole (recorded in ``report`` with its
    reason), never left half imported. Never raises for a bad folder."""
    manifest_path = folder / RUN_JSON
    if manifest_path.is_symlink():
        report.skipped.append((str(folder), "run.json is a link"))
        return
    try:
        data = read_manifest(manifest_path)
        job_id, reason, best, best_loss, steps = _plan(folder, data, report)
    except (ManifestError, ValueError, TypeError, RecursionError, OSError) as exc:
        report.skipped.append((str(folder), f"{type(exc).__name__}: {exc}"[:200]))
        return
    if store.get_record(job_id) is not None:
        report.known.append(job_id)
        return
    phase = PHASE_OF_END[reason] if reason else Phase.interrupted
    created = _timestamp(data.get("started_at"))
    checkpoint = latest_checkpoint(folder)
    try:
        store.create_run(job_id, data["request"], str(folder), Phase.training.value, created_at=created)
        for event in steps:
            store.add_metric(event)
        store.finish_run(
            job_id,
            phase.value,
            ERROR_NOT_KEPT if phase is Phase.error else None,
            str(checkpoint) if checkpoint else None,
            (reason or EndReason.interrupted.value),
            best_checkpoint=best,
            best_eval_loss=best_loss,
            finished_at=_timestamp(data.get("ended_at")) or created,
        )
    except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
        store.delete_run(job_id)  # nothing half imported: the folder is skipped whole
        report.skipped.append((str(folder), f"{type(exc).__name__}: {exc}"[:200]))
        return
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
        except Exception as exc:  # noqa: BLE001 - one folder must never stop the others (or start-up)
            report.skipped.append((str(folder), f"{type(exc).__name__}: {exc}"[:200]))
    log.info("%s from %s", report.summary(), runs_dir)
    return report
