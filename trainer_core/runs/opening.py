"""Opening a run at Start: a new run (fresh job id, claimed output folder) or a resumed one (its own
id and folder, its history up to the checkpoint), recorded in the run history."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from trainer_core.runs.folders import OutputDirError, claim, release
from trainer_core.runs.metrics import MetricsHistory
from trainer_core.runs.resume import find_resume_target
from trainer_core.runs.store import RunStore
from trainer_core.runs.write_folders import claim_folders
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import TrainingProgress, new_job_id
from trainer_core.vocabulary import Phase


@dataclass(frozen=True)
class OpenedRun:
    """What the job runner needs of an opened run.

    ``created_at``: when the run was first created (Unix s; a resumed run keeps its own).
    ``training_seconds_before``: training seconds already logged before this session, the
    ``elapsed_seconds`` of the last stored train event at or before the resumed checkpoint's step
    (0.0 for a new run); the runner adds it to every progress event of the session."""

    job_id: str
    output_dir: Path
    created_at: float
    training_seconds_before: float = 0.0


def open_run(
    request: TrainingStartRequest, store: Optional[RunStore], history: MetricsHistory, runs_dir: Path
) -> OpenedRun:
    """The run ``request`` starts (see ``OpenedRun``); resets ``history`` (to the resumed run's
    steps up to its checkpoint). A new run claims its output folder (new or empty; see
    ``runs.folders``), by default ``runs_dir/<job id>``, and every run the folders it writes into
    beside it (``write_folders.claim_folders``: a ``tensorboard_dir`` of its own). Raises
    ResumeError or OutputDirError."""
    if request.resume_from_checkpoint:
        target = find_resume_target(store, request.resume_from_checkpoint)
        job_id, output_dir = target.run.job_id, Path(target.run.output_dir)
        claim_folders(request, output_dir, job_id)
        kept = [e for e in store.get_run(job_id).metrics if e.step <= target.step]
        lost = logged_but_not_kept(output_dir / "metrics.jsonl", kept, target.step)
        store.reopen_run(job_id, request.public_dict(), Phase.loading_model.value, target.step)
        for event in lost:
            store.add_metric(event)
        kept += lost
        history.reset()
        for event in kept:
            history.append(event)
        return OpenedRun(job_id, output_dir, target.run.created_at, training_seconds_before(kept))
    job_id = new_job_id()
    output_dir = (Path(request.output_dir) if request.output_dir else runs_dir / job_id).resolve()
    claim(output_dir, job_id)
    try:
        claim_folders(request, output_dir, job_id)
    except OutputDirError:
        release(output_dir, job_id)
        raise
    created_at = time.time()
    if store is not None:
        created_at = store.create_run(job_id, request.public_dict(), str(output_dir), Phase.loading_model.value)
    history.reset()
    return OpenedRun(job_id, output_dir, created_at)


def training_seconds_before(kept: list[TrainingProgress]) -> float:
    """``elapsed_seconds`` of the last train event (one with a loss) in ``kept``; 0.0 if none."""
    return next((e.elapsed_seconds for e in reversed(kept) if e.loss is not None), 0.0)


def logged_but_not_kept(metrics_path: Path, kept: list[TrainingProgress], up_to_step: int) -> list[TrainingProgress]:
    """The steps up to ``up_to_step`` that the worker logged to the run's ``metrics.jsonl`` (one
    ``TrainingProgress`` JSON a line, written before the event is sent) but the run history lacks:
    those whose events were still on their way when the app died, while the checkpoint being
    resumed already holds them. A train and an eval event of one step count apart. Unreadable
    lines are skipped (the file is the worker's; the history stays as it is)."""
    have = {(e.step, e.loss is not None) for e in kept}
    lost: list[TrainingProgress] = []
    try:
        lines = metrics_path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return lost
    for line in lines:
        try:
            event = TrainingProgress.model_validate_json(line)
        except ValueError:
            continue
        if event.step <= up_to_step and (event.step, event.loss is not None) not in have:
            have.add((event.step, event.loss is not None))
            lost.append(event)
    return lost
