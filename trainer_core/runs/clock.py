"""Training time and wall time of the one job, continued over resumes.

The worker measures ``elapsed_seconds`` from its own train begin; ``RunClock.continued`` adds the
training seconds the run had before this session, so the history and the run store hold training
time over the whole run. Wall time is clock time since the run was created, idle gaps included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

from trainer_core.status import TrainingProgress


@dataclass
class RunClock:
    """The current job's clocks. ``created_at`` and ``ended_at`` are Unix seconds;
    ``training_seconds_before`` is the training time before this session (s, see ``OpenedRun``).
    Not thread-safe: the job runner guards it with its state lock."""

    created_at: float
    training_seconds_before: float = 0.0
    ended_at: Optional[float] = None
    session_started_at: float = field(default_factory=time.time)  # this Start (a resume's too), Unix s
    phase_started_at: float = field(default_factory=time.time)  # the current phase's start, Unix s
    session_first: Optional[TrainingProgress] = None  # this session's first train event with a token count

    def continued(self, progress: TrainingProgress) -> TrainingProgress:
        """``progress`` (as the worker sent it) with ``elapsed_seconds`` continued over resumes;
        the first train event with ``num_tokens`` becomes the start of the rate window."""
        progress = progress.model_copy(
            update={"elapsed_seconds": progress.elapsed_seconds + self.training_seconds_before}
        )
        if self.session_first is None and progress.loss is not None and progress.num_tokens is not None:
            self.session_first = progress
        return progress

    def end(self, now: Optional[float] = None) -> None:
        """The job has ended (``now``: Unix s, default the current time)."""
        self.ended_at = time.time() if now is None else now

    def details(self, latest_train: Optional[TrainingProgress], now: Optional[float] = None) -> dict[str, Any]:
        """Status details: ``started_at`` (the run's creation, Unix s), ``wall_seconds`` (since then:
        to now while live, to the end once ended; s) and ``tokens_per_second`` (see ``rate``); and
        ``session_seconds`` (since this Start) and ``phase_seconds`` (since the current phase began;
        s, what the monitor counts up before the first step)."""
        until = self.ended_at if self.ended_at is not None else (time.time() if now is None else now)
        return {
            "started_at": self.created_at,
            "wall_seconds": max(until - self.created_at, 0.0),
            "session_seconds": max(until - self.session_started_at, 0.0),
            "phase_seconds": max(until - self.phase_started_at, 0.0),
            "tokens_per_second": self.rate(latest_train),
        }

    def rate(self, latest_train: Optional[TrainingProgress]) -> Optional[float]:
        """Input tokens (non-padding, ``num_tokens``) per training second in this session: the tokens
        between its first logged train step and ``latest_train`` over the training seconds between
        them, so model loading and the first step's warm-up do not count. None before two train
        steps are logged in this session, or when the trainer does not count tokens."""
        first = self.session_first
        if first is None or latest_train is None or latest_train.num_tokens is None:
            return None
        seconds = latest_train.elapsed_seconds - first.elapsed_seconds
        if latest_train.step <= first.step or seconds <= 0:
            return None
        return (latest_train.num_tokens - first.num_tokens) / seconds
