"""Which run a checkpoint belongs to, and whether it can be resumed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from trainer_core.schemas import RESUMABLE_PHASES
from trainer_core.store import RunRecord, RunStore

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


class ResumeError(ValueError):
    """``resume_from_checkpoint`` names no resumable checkpoint; the message says why."""


@dataclass(frozen=True)
class ResumeTarget:
    """The run to continue and the step its checkpoint holds."""

    run: RunRecord
    checkpoint: Path
    step: int


def latest_checkpoint(output_dir: Path) -> Optional[Path]:
    """The highest-numbered ``checkpoint-N`` folder with trainer state in ``output_dir``, if any."""
    found = [(int(m.group(1)), p) for p in Path(output_dir).glob("checkpoint-*")
             if (m := CHECKPOINT.match(p.name)) and (p / "trainer_state.json").is_file()]
    return max(found)[1] if found else None


def find_resume_target(store: Optional[RunStore], checkpoint: str) -> ResumeTarget:
    """Validate ``checkpoint`` (an already confined path): a trainer checkpoint folder of a stopped or
    interrupted run in ``store``. Raises ResumeError with the reason otherwise."""
    path = Path(checkpoint)
    state = path / "trainer_state.json"
    if not state.is_file():
        raise ResumeError(f"resume_from_checkpoint: {path} has no trainer_state.json; give a checkpoint-N folder "
                          "saved by a stopped run")
    if store is None:
        raise ResumeError("resume_from_checkpoint: no run history is kept by this process")
    run = store.find_by_output_dir(str(path.parent))
    if run is None:
        raise ResumeError(f"resume_from_checkpoint: {path} does not belong to any run in the history")
    if run.phase not in RESUMABLE_PHASES:
        raise ResumeError(f"resume_from_checkpoint: run {run.job_id} is {run.phase.value}; only stopped or "
                          "interrupted runs can be resumed")
    step = int(json.loads(state.read_text(encoding="utf-8")).get("global_step", 0))
    return ResumeTarget(run=run, checkpoint=path, step=step)
