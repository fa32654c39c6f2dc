"""Which run a checkpoint belongs to and whether it can be resumed (``resume_from_checkpoint``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from trainer_core.refusals import Refusal
from trainer_core.runs.store import RunRecord, RunStore
from trainer_core.training.checkpoints import latest_checkpoint
from trainer_core.vocabulary import RESUMABLE_PHASES


class ResumeError(Refusal):
    """``resume_from_checkpoint`` names no resumable checkpoint; the message says why."""

    code = "not_resumable"


@dataclass(frozen=True)
class ResumeTarget:
    """The run to continue and the step its checkpoint holds."""

    run: RunRecord
    checkpoint: Path
    step: int


def find_resume_target(store: Optional[RunStore], checkpoint: str) -> ResumeTarget:
    """Validate ``checkpoint`` (an already confined path): a complete trainer checkpoint folder of a
    stopped, interrupted or failed (``error``) run in ``store``. Raises ResumeError with the reason
    otherwise."""
    path = Path(checkpoint)
    state = path / "trainer_state.json"
    if not state.is_file():
        _not_a_checkpoint(store, path)
    if store is None:
        raise ResumeError(
            "resume_from_checkpoint: no run history is kept by this process", fields=("resume_from_checkpoint",)
        )
    run = store.find_by_output_dir(str(path.parent))
    if run is None:
        raise ResumeError(
            f"resume_from_checkpoint: {path} does not belong to any run in the history",
            fields=("resume_from_checkpoint",),
        )
    if run.phase not in RESUMABLE_PHASES:
        values = [p.value for p in RESUMABLE_PHASES]
        names = f"{', '.join(values[:-1])} or {values[-1]}"
        raise ResumeError(
            f"resume_from_checkpoint: run {run.job_id} is {run.phase.value}; only {names} runs can "
            "be resumed (from their last complete checkpoint)",
            fields=("resume_from_checkpoint",),
        )
    step = int(json.loads(state.read_text(encoding="utf-8")).get("global_step", 0))
    return ResumeTarget(run=run, checkpoint=path, step=step)


def _not_a_checkpoint(store: Optional[RunStore], path: Path) -> None:
    """Raise ResumeError saying why ``path`` (without trainer state) cannot be resumed, naming the
    run's last complete checkpoint when ``path`` is a run's folder or lies in one."""
    head = f"resume_from_checkpoint: {path} is not a complete checkpoint (no trainer_state.json)"
    run = store and (store.find_by_output_dir(str(path)) or store.find_by_output_dir(str(path.parent)))
    field = ("resume_from_checkpoint",)
    if not run:
        raise ResumeError(
            f"{head}; give a checkpoint-N folder saved by a stopped, interrupted or failed run", fields=field
        )
    latest = latest_checkpoint(Path(run.output_dir))
    if latest is not None:
        raise ResumeError(f"{head}; the last complete checkpoint of run {run.job_id} is {latest}", fields=field)
    raise ResumeError(
        f"{head}; run {run.job_id} ({run.phase.value}) saved no complete checkpoint, so there is nothing "
        "to resume from: start it again (save_steps sets how often checkpoints are saved)",
        fields=(*field, "save_steps"),
    )
