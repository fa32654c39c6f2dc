"""What a background task is, as stored and as answered by the API.

A task is one export, evaluation, Hub push or data recipe run on a model choice (``base``, a run's job id, or
``JOB_ID/checkpoint-N``; see ``serving.choices``). Workers talk to the ``TaskRunner`` with
``(kind, payload)`` events (``TaskEvent``); the runner keeps the record current in the run history.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, Optional

from pydantic import BaseModel, Field


class TaskKind(str, Enum):
    """What a task does."""

    export = "export"
    evaluate = "evaluate"
    push = "push"
    recipe = "recipe"


class TaskPhase(str, Enum):
    """``running`` until one of the final phases. ``failed`` covers a check that did not pass (the
    files stay, marked as failed) and an error (nothing is left, but for a recipe run: see
    ``tasks.runner.KEEPS_WHAT_WAS_MADE``). A stopped recipe run is ``cancelled`` with its result."""

    running = "running"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


FINAL_TASK_PHASES = (TaskPhase.completed, TaskPhase.failed, TaskPhase.cancelled)


class TaskRecord(BaseModel):
    """One task. Times are Unix seconds; ``progress`` is 0..1; ``result`` is the worker's result
    (``export.schemas.ExportResult`` / ``evaluation.schemas.EvaluationResult`` /
    ``export.schemas.PushResult`` / ``recipes.task_worker.task_result`` as a dict); ``request``
    never holds a token."""

    task_id: str
    kind: TaskKind
    job_id: Optional[str] = Field(None, description="The run the task belongs to (None for the base model).")
    model: str = Field(description="The model choice id: base, a job id, or JOB_ID/checkpoint-N.")
    phase: TaskPhase = TaskPhase.running
    progress: float = 0.0
    message: str = ""
    created_at: float = Field(default_factory=time.time)
    finished_at: Optional[float] = None
    request: dict[str, Any] = Field(default_factory=dict)
    result: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    output_dir: Optional[str] = Field(None, description="Where the task's files are (inside the run's folder).")

    def file_names(self) -> list[str]:
        """The names of the files this task listed once finished (an export's or a recipe run's files; an
        evaluation's predictions and ``scores.json``), in the result's order; [] while it runs."""
        if self.phase == TaskPhase.running or not self.output_dir or not self.result:
            return []
        names = [f.get("name") for f in self.result.get("files", [])] + [self.result.get("predictions_file")]
        if self.kind == TaskKind.evaluate:
            names.append("scores.json")
        return [n for n in dict.fromkeys(names) if isinstance(n, str) and n]


class TaskEvent:
    """Event kinds on a task worker's queue (payloads are plain dicts)."""

    PROGRESS = "progress"  # {"fraction": float 0..1, "message": str}
    RESULT = "result"  # the result dict; ends the task as completed (or failed when result["passed"] is False)
    ERROR = "error"  # {"message": str, "kind": "input" | "internal"}; ends the task as failed
