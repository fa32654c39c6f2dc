"""How a job ends: its ``EndReason``, what a cancel left, and the run folder's bookkeeping
(``run.json`` completed, the files recorded, the newest and the best checkpoint found).

Used by the job runner once its worker has ended (or never started)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.runs.folders import record_files
from trainer_core.runs.write_folders import record_claimed
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import TrainingProgress
from trainer_core.training.checkpoints import best_checkpoint, latest_checkpoint, remove_partial_saves
from trainer_core.training.manifest import final_metrics, finish_manifest
from trainer_core.vocabulary import EndReason, Phase

log = logging.getLogger(__name__)


def end_reason(phase: Phase, cancelled: bool, early_stopped: bool = False) -> EndReason:
    """Why a job that ended in ``phase`` (a terminal phase) ended: a cancel ends in
    ``Phase.stopped`` like a Stop and save, but is ``EndReason.cancelled``; a run that early
    stopping ended is ``Phase.completed`` and ``EndReason.early_stopped``."""
    if phase == Phase.stopped and cancelled:
        return EndReason.cancelled
    if phase == Phase.completed and early_stopped:
        return EndReason.early_stopped
    return EndReason(phase.value)


@dataclass(frozen=True)
class Settled:
    """What an ended run left: its newest complete checkpoint, its best checkpoint (early stopping)
    and its lowest eval loss (nats per token); each None when there is none."""

    last_checkpoint: Optional[Path] = None
    best_checkpoint: Optional[Path] = None
    best_eval_loss: Optional[float] = None


def settle_run(
    output_dir: Optional[str],
    job_id: Optional[str],
    request: Optional[TrainingStartRequest],
    reason: EndReason,
    events: list[TrainingProgress],
) -> Settled:
    """Complete the run's ``run.json`` (``training.manifest.finish_manifest``; an OSError is logged),
    then record its files (``settle_files``) and return what it left (``Settled``)."""
    if not output_dir:
        return Settled()
    best, best_loss = best_checkpoint(Path(output_dir))
    # With early stopping the best is Trainer's (an improvement must beat the threshold), which may
    # not be the lowest logged eval loss; the checkpoint's own numbers are the ones to report.
    best_eval = (best_loss, _step_of(best)) if best is not None and best_loss is not None else None
    if request is not None and job_id:
        try:
            finish_manifest(
                Path(output_dir), request, job_id, reason.value, events, str(best) if best else None, best_eval
            )
        except OSError:
            log.exception("could not complete run.json of %s", job_id)
    checkpoint = settle_files(output_dir, job_id, request)
    return Settled(checkpoint, best, best_eval[0] if best_eval else final_metrics(events)["best_eval_loss"])


def _step_of(checkpoint: Optional[Path]) -> Optional[int]:
    """N of a ``checkpoint-N`` folder (None for another name)."""
    tail = checkpoint.name.rsplit("-", 1)[-1] if checkpoint is not None else ""
    return int(tail) if tail.isdigit() else None


def cancelled_message(output_dir: Optional[str]) -> str:
    """What a cancel left: nothing new, and the newest complete checkpoint if there is one."""
    checkpoint = latest_checkpoint(Path(output_dir)) if output_dir else None
    if checkpoint is None:
        return "Cancelled; nothing was saved."
    return f"Cancelled; nothing more was saved (last checkpoint: {checkpoint.name})."


def settle_files(
    output_dir: Optional[str], job_id: Optional[str], request: Optional[TrainingStartRequest] = None
) -> Optional[Path]:
    """Record the files of run ``job_id`` in ``output_dir`` and in the folders ``request`` claimed
    beside it (``write_folders.record_claimed``): what Delete may remove; an OSError is logged.
    Returns its newest complete checkpoint folder, or None."""
    checkpoint = latest_checkpoint(Path(output_dir)) if output_dir else None
    if output_dir and job_id:
        try:
            record_files(Path(output_dir), job_id)
            if request is not None:
                record_claimed(request, Path(output_dir), job_id)
        except OSError:
            log.exception("could not record the files of %s", job_id)
    return checkpoint


def remove_partial_saves_logged(output_dir: Path) -> None:
    """Delete the staging folders of saves the ended worker did not finish (see ``resume``); an
    OSError is logged, not raised."""
    try:
        remove_partial_saves(output_dir)
    except OSError:
        log.exception("could not remove partial saves in %s", output_dir)


def reap(worker: Any, output_dir: Path, wait_s: float, grace_s: float) -> None:
    """Let an ended job's worker (a ``WorkerProcess``, or a ``RankGroup``'s launcher and ranks) exit:
    up to ``wait_s`` seconds to tear down by itself after its final event, then SIGTERM and SIGKILL
    after ``grace_s``; then remove the staging folders of saves it did not finish. Done before the
    job counts as ended, so no process of a finished job is left for the interpreter's exit to kill
    (a CLI run ends right after), and a new Start never shares the machine with the last one's
    teardown."""
    worker.join(wait_s)
    worker.terminate(grace_s)
    remove_partial_saves_logged(output_dir)
