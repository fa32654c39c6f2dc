"""One run as the history stores it (``RunRecord``) and with its per-step metrics (``RunDetail``);
``RunStore`` (``runs.store``) reads and writes them."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, Field, computed_field

from trainer_core.status import TrainingProgress
from trainer_core.vocabulary import EndReason, Phase


class RunRecord(BaseModel):
    """One run as stored. Times are Unix seconds (``created_at``, ``finished_at``) or seconds.

    ``training_seconds``: the last train event's ``elapsed_seconds`` (training time, continued over
    resumes; None before the first step). ``tokens_per_second``: input tokens per training second
    over the whole run, ``num_tokens / elapsed_seconds`` of that event (None when the trainer did
    not count tokens). ``end_reason``: see ``EndReason`` (None while live, and for runs recorded by
    versions before it existed). ``best_eval_loss``: the lowest logged eval loss (nats per token;
    None without evaluation). ``best_checkpoint``: the checkpoint folder of the best eval loss, kept
    and loaded as the final weights when early stopping was on (None otherwise). ``wall_seconds``
    (also as ``duration_seconds``) is clock time from creation to finish, idle time between a Stop
    and a Resume included. ``name`` and ``note``: the user's label for the run (None until set;
    at most ``labels.NAME_MAX_CHARS`` / ``NOTE_MAX_CHARS`` characters; plain text, never markup)."""

    job_id: str
    created_at: float
    finished_at: Optional[float] = None
    phase: Phase
    request: dict[str, Any]
    output_dir: str
    last_checkpoint: Optional[str] = None
    final_loss: Optional[float] = None
    total_steps: Optional[int] = None
    last_step: int = 0
    error: Optional[str] = None
    training_seconds: Optional[float] = None
    tokens_per_second: Optional[float] = None
    end_reason: Optional[EndReason] = None
    best_checkpoint: Optional[str] = None
    best_eval_loss: Optional[float] = None
    name: Optional[str] = None
    note: Optional[str] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def wall_seconds(self) -> Optional[float]:
        """Wall time from creation to finish in seconds, resumes' idle gaps included (None while live)."""
        return None if self.finished_at is None else self.finished_at - self.created_at

    @property
    def duration_seconds(self) -> Optional[float]:
        """Alias of ``wall_seconds`` (the older name)."""
        return self.wall_seconds


class RunDetail(RunRecord):
    """A run with its per-step metrics (train and eval events, in logged order)."""

    metrics: list[TrainingProgress] = Field(default_factory=list)
