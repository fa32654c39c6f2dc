"""Time left in a training run, from a smoothed step time once a few steps are in.

A run's first step carries the warm-up (allocations, the first kernels, caches), and step times
drift with sequence lengths, evaluations and whatever else the machine does; the elapsed time over
the steps done (the old estimate) said 10 m at step 3 of a run that took 20 m. So: the median of
the last ``WINDOW`` optimizer-step times (the first step of a session left out), times the steps
left, once ``MIN_STEPS`` are timed; the spread is the same product with the window's 20th and
80th percentile step times (the range recent steps give, not a confidence interval).
"""

from __future__ import annotations

import statistics
from collections import deque
from typing import Optional

WINDOW = 20
MIN_STEPS = 3


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
        times = sorted(self._times)
        cuts = statistics.quantiles(times, n=5, method="inclusive")  # the 20th, 40th, 60th, 80th percentiles
        return steps_left * statistics.median(times), steps_left * cuts[0], steps_left * cuts[3]
