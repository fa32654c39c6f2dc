"""Opening a run at Start: a new run (fresh job id, claimed output folder) or a resumed one (its own
id and folder, its history up to the checkpoint), recorded in the run history."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from trainer_core.runs.folders import claim
from trainer_core.runs.metrics import MetricsHistory
from trainer_core.runs.store import RunStore
from trainer_core.schemas import Phase, TrainingStartRequest, new_job_id
from trainer_core.training.checkpoints import find_resume_target


def open_run(request: TrainingStartRequest, store: Optional[RunStore], history: MetricsHistory,
             runs_dir: Path) -> tuple[str, Path]:
    """(job id, output folder) of the run ``request`` starts; resets ``history`` (to the resumed
    run's steps up to its checkpoint). A new run claims its output folder (new or empty; see
    ``runs.folders``), by default ``runs_dir/<job id>``. Raises ResumeError or OutputDirError."""
    if request.resume_from_checkpoint:
        target = find_resume_target(store, request.resume_from_checkpoint)
        job_id, output_dir = target.run.job_id, Path(target.run.output_dir)
        earlier = store.get_run(job_id).metrics
        store.reopen_run(job_id, request.public_dict(), Phase.loading_model.value, target.step)
        history.reset()
        for event in (e for e in earlier if e.step <= target.step):
            history.append(event)
        return job_id, output_dir
    job_id = new_job_id()
    output_dir = (Path(request.output_dir) if request.output_dir else runs_dir / job_id).resolve()
    claim(output_dir, job_id)
    if store is not None:
        store.create_run(job_id, request.public_dict(), str(output_dir), Phase.loading_model.value)
    history.reset()
    return job_id, output_dir
