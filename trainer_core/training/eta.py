"""Time left in a training run (per optimizer step) or a task (per share of its progress), from the
latest timings, following a change of pace within a few steps.

A run's first step carries the warm-up (allocations, the first kernels, caches), and step times
drift with sequence lengths, evaluations and whatever else the machine does: a CPU shared with other
work can make every step twice as long from one minute to the next. So (``spread``): the point is
the median of the last ``RECENT`` step times (the first step of a session left out), which follows a
change of load within three steps, times the steps left, once ``MIN_STEPS`` are timed; the range
widens that with what the steps have done lately: from the lower of the ``WINDOW`` latest steps'
20th percentile and the recent median less their standard deviation, to the higher of the 80th
percentile, the recent median plus it and the slowest of the recent steps (a pace that keeps
creeping up after a change stays inside the range). (The range recent steps give, not a confidence interval:
the load may come back or go away.) A task's pace is the same rule over the seconds per unit of
progress between its progress reports; once the wait since the last report is longer than a report
usually takes, that wait is the pace at least (a task that stalls has its time left grow, not sit
still until its next report).
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence
from typing import Optional

WINDOW = 20
RECENT = 5
MIN_STEPS = 3


def spread(times: Sequence[float]) -> tuple[float, float, float]:
    """(point, low, high) time per unit from ``times`` in order, oldest first (at least one): the
    median of the last ``RECENT``, and the range described above."""
    recent = list(times)[-RECENT:]
    level = statistics.median(recent)
    deviation = statistics.pstdev(recent) if len(recent) > 1 else 0.0
    window = sorted(times)
    if len(window) > 1:
        cuts = statistics.quantiles(window, n=5, method="inclusive")  # the 20th, 40th, 60th, 80th percentiles
        q20, q80 = cuts[0], cuts[3]
    else:
        q20 = q80 = window[0]
    return level, max(min(q20, level - deviation), 0.0), max(q80, level + deviation, max(recent))


class StepTimes:
    """Durations (seconds) of the latest optimizer steps, fed by ``step_ended`` at each step end."""

    def __init__(self) -> None:
        self._times: deque[float] = deque(maxlen=WINDOW)
        self._last: Optional[float] = None

    def step_ended(self, now: float) -> None:
        """A step ended at ``now`` (monotonic seconds); the first call only starts the clock."""
        if self._last is not None:
            self._times.append(max(0.0, now - self._last))
        self._last = now

    def estimate(self, steps_left: int) -> Optional[tuple[float, float, float]]:
        """(time left, low, high) in seconds for ``steps_left`` more steps, or None before
        MIN_STEPS steps are timed."""
        if len(self._times) < MIN_STEPS:
            return None
        return tuple(steps_left * value for value in spread(self._times))  # type: ignore[return-value]


class ProgressPace:
    """A task's progress reports (Unix seconds, fraction done 0..1), fed by ``update``; the first
    report past ``start`` (the task's start, its loading included) opens the clock."""

    def __init__(self, start: float) -> None:
        self._reports: deque[tuple[float, float]] = deque([(start, 0.0)], maxlen=WINDOW + 1)

    def update(self, now: float, fraction: float) -> None:
        """The task reported ``fraction`` done at ``now``; a repeat of the last fraction is ignored."""
        if fraction > self._reports[-1][1]:
            self._reports.append((now, fraction))

    def estimate(self, now: float) -> Optional[tuple[float, float, float]]:
        """(time left, low, high) in seconds at ``now``, or None before two reports after the
        first (the first interval holds the loading, and is left out once there are others)."""
        reports = list(self._reports)
        if len(reports) < 3:
            return None
        paces = [(t2 - t1) / (f2 - f1) for (t1, f1), (t2, f2) in zip(reports, reports[1:])]  # seconds per unit
        steps = [f2 - f1 for (_, f1), (_, f2) in zip(reports, reports[1:])]
        if reports[0][1] == 0.0 and len(paces) > 1:
            paces, steps = paces[1:], steps[1:]
        waited = (now - reports[-1][0]) / statistics.median(steps)  # the wait so far, as a pace
        overdue = waited > statistics.median(paces[-RECENT:])
        point, low, high = spread([*paces, waited] if overdue else paces)
        left = 1.0 - reports[-1][1]
        return left * max(point, waited), left * low, left * max(high, waited)
