"""Thread-safe history of a job's progress events, with a change counter that watchers block on."""

from __future__ import annotations

import threading
from typing import Optional

from trainer_core.runs.minmax import MinMaxSeries
from trainer_core.status import EMBEDDING_EVAL_SERIES, GRPO_SERIES, PREFERENCE_SERIES, MetricHistory, TrainingProgress

CHART_SERIES = (
    "loss",
    "eval_loss",
    "learning_rate",
    "grad_norm",
    *PREFERENCE_SERIES,
    *GRPO_SERIES,
    *EMBEDDING_EVAL_SERIES,
)  # TrainingProgress fields charted; GRPO runs add "rewards/<name>" per reward function

ChartPoints = dict[str, tuple[list[float], list[float]]]  # series name -> (steps, values), downsampled


class MetricsHistory:
    """Every ``TrainingProgress`` of the current job, in arrival order.

    Readers (UI generators, SSE streams) call ``wait_for_change(version, timeout_s)`` and wake on any
    append or ``touch()`` (the runner touches on phase changes), so nobody polls.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events: list[TrainingProgress] = []
        self._charts = _chart_series()
        self._version = 0

    @property
    def version(self) -> int:
        """Counter that rises on every change."""
        with self._cond:
            return self._version

    def _bump(self) -> None:
        self._version += 1
        self._cond.notify_all()

    def reset(self) -> None:
        """Forget all events (a new job or an explicit reset)."""
        with self._cond:
            self._events = []
            self._charts = _chart_series()
            self._bump()

    def append(self, progress: TrainingProgress) -> None:
        """Add one logged step (train or eval)."""
        with self._cond:
            self._events.append(progress)
            _add(self._charts, progress)
            self._bump()

    def touch(self) -> None:
        """Wake watchers without adding an event (status changed)."""
        with self._cond:
            self._bump()

    def wait_for_change(self, version: int, timeout_s: float) -> int:
        """Block until the version differs from ``version`` or ``timeout_s`` seconds pass; returns
        the current version."""
        with self._cond:
            self._cond.wait_for(lambda: self._version != version, timeout=timeout_s)
            return self._version

    def count(self) -> int:
        """How many events there are (an index for ``events_from``)."""
        with self._cond:
            return len(self._events)

    def events_from(self, index: int) -> list[TrainingProgress]:
        """A copy of the events at positions ``index`` and later (a train and an eval event may
        share a step, so streams track positions, not steps)."""
        with self._cond:
            return self._events[index:]

    def first_index_after(self, step: int) -> int:
        """Position of the first event whose step is greater than ``step``."""
        with self._cond:
            return next((i for i, e in enumerate(self._events) if e.step > step), len(self._events))

    def latest(self) -> Optional[TrainingProgress]:
        """The newest event of any kind."""
        with self._cond:
            return self._events[-1] if self._events else None

    def events(self, after_step: int = -1) -> list[TrainingProgress]:
        """A copy of the events whose step is greater than ``after_step``."""
        with self._cond:
            return [e for e in self._events if e.step > after_step]

    def latest_train(self) -> Optional[TrainingProgress]:
        """The newest event that carries a training loss (None before the first step)."""
        with self._cond:
            return next((e for e in reversed(self._events) if e.loss is not None), None)

    def series(self) -> MetricHistory:
        """Every logged value so far, at full resolution (see ``series_of``; O(events))."""
        return series_of(self.events())

    def chart_points(self) -> ChartPoints:
        """The charted series downsampled to at most ``minmax.MAX_POINTS`` points each, kept up to
        date on every append: O(points), independent of the history's length."""
        with self._cond:
            return {name: series.points() for name, series in self._charts.items()}


def _chart_series() -> dict[str, MinMaxSeries]:
    return {name: MinMaxSeries() for name in CHART_SERIES}


def _add(charts: dict[str, MinMaxSeries], progress: TrainingProgress) -> None:
    for name in CHART_SERIES:
        charts[name].append(progress.step, getattr(progress, name))
    for name, value in progress.rewards.items():
        charts.setdefault(f"rewards/{name}", MinMaxSeries()).append(progress.step, value)


def chart_points_of(events: list[TrainingProgress]) -> ChartPoints:
    """``chart_points`` for a stored run's events."""
    charts = _chart_series()
    for progress in events:
        _add(charts, progress)
    return {name: series.points() for name, series in charts.items()}


def series_of(events: list[TrainingProgress]) -> MetricHistory:
    """Chart series: loss / learning_rate per train step, grad_norm and eval_loss where present; for a
    preference run (any event with a reward or kl) its ``PREFERENCE_SERIES`` per train step too; for
    a GRPO run (any event with a ``reward``) its ``GRPO_SERIES``, each reward function's series and
    the latest step's sampled completions; for an embedding run (any event with a retrieval metric)
    its ``EMBEDDING_EVAL_SERIES`` per eval step."""
    history = MetricHistory()
    preference = any(getattr(e, name) is not None for e in events for name in PREFERENCE_SERIES)
    grpo = any(e.reward is not None for e in events)
    retrieval = any(getattr(e, name) is not None for e in events for name in EMBEDDING_EVAL_SERIES)
    functions = list(dict.fromkeys(name for e in events for name in e.rewards)) if grpo else []
    for e in events:
        if e.loss is not None:
            history.steps.append(e.step)
            history.loss.append(e.loss)
            history.learning_rate.append(e.learning_rate)
            for name in PREFERENCE_SERIES if preference else ():
                getattr(history, name).append(getattr(e, name))
            for name in GRPO_SERIES if grpo else ():
                getattr(history, name).append(getattr(e, name))
            for name in functions:
                history.rewards.setdefault(name, []).append(e.rewards.get(name))
            if e.samples:
                history.samples = list(e.samples)
            if e.grad_norm is not None:
                history.grad_norm_steps.append(e.step)
                history.grad_norm.append(e.grad_norm)
        if e.eval_loss is not None:
            history.eval_steps.append(e.step)
            history.eval_loss.append(e.eval_loss)
            for name in EMBEDDING_EVAL_SERIES if retrieval else ():
                getattr(history, name).append(getattr(e, name))
    return history
