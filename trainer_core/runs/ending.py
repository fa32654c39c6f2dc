"""How a job ends: its ``EndReason``, what a cancel left, and the run folder's bookkeeping.

Used by the job runner once its worker has ended (or never started)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from trainer_core.runs.folders import record_files
from trainer_core.schemas import EndReason, Phase
from trainer_core.training.checkpoints import latest_checkpoint, remove_partial_saves

log = logging.getLogger(__name__)


def end_reason(phase: Phase, cancelled: bool) -> EndReason:
    """Why a job that ended in ``phase`` (a terminal phase) ended: a cancel ends in
    ``Phase.stopped`` like a Stop and save, but is ``EndReason.cancelled``."""
    if phase == Phase.stopped and cancelled:
        return EndReason.cancelled
    return EndReason(phase.value)


def cancelled_message(output_dir: Optional[str]) -> str:
    """What a cancel left: nothing new, and the newest complete checkpoint if there is one."""
    checkpoint = latest_checkpoint(Path(output_dir)) if output_dir else None
    if checkpoint is None:
        return "Cancelled; nothing was saved."
    return f"Cancelled; nothing more was saved (last checkpoint: {checkpoint.name})."


def settle_files(output_dir: Optional[str], job_id: Optional[str]) -> Optional[Path]:
    """Record the files of run ``job_id`` in ``output_dir`` (what Delete may remove; an OSError is
    logged) and return its newest complete checkpoint folder, or None."""
    checkpoint = latest_checkpoint(Path(output_dir)) if output_dir else None
    if output_dir and job_id:
        try:
            record_files(Path(output_dir), job_id)
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
