"""Incremental min/max downsampling for live charts: O(1) amortised per appended point and at most
``max_points`` points out, however long the run, with every spike kept.

The series is cut into at most ``max_points / 2`` buckets of equal width (a power of two, in
points). Each bucket keeps its lowest and its highest point. When the buckets run out, adjacent
pairs merge and the width doubles, so a point is touched O(log n) times over a run of n points.
This is the min/max decimation that plotting libraries use for long time series (e.g. Plotly
Resampler's MinMaxAggregator), made incremental.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

MAX_POINTS = 500  # per series and chart: about 20 KB of JSON (bench/charts.py)

Point = tuple[float, float]  # (step, value)


@dataclass
class _Bucket:
    low: Point
    high: Point
    count: int

    def add(self, point: Point) -> None:
        if point[1] < self.low[1]:
            self.low = point
        if point[1] > self.high[1]:
            self.high = point
        self.count += 1

    def merged(self, other: _Bucket) -> _Bucket:
        low = self.low if self.low[1] <= other.low[1] else other.low
        high = self.high if self.high[1] >= other.high[1] else other.high
        return _Bucket(low, high, self.count + other.count)


class MinMaxSeries:
    """A downsampled (step, value) series that grows one point at a time. Not thread-safe: the
    owner (``MetricsHistory``) locks around it."""

    def __init__(self, max_points: int = MAX_POINTS) -> None:
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2, got {max_points}")
        self._max_buckets = max_points // 2
        self._width = 1
        self._buckets: list[_Bucket] = []

    def append(self, step: float, value: Optional[float]) -> None:
        """Add one point; None values are skipped."""
        if value is None:
            return
        point = (step, value)
        if self._buckets and self._buckets[-1].count < self._width:
            self._buckets[-1].add(point)
            return
        if len(self._buckets) == self._max_buckets:
            self._halve()
            if self._buckets[-1].count < self._width:
                self._buckets[-1].add(point)
                return
        self._buckets.append(_Bucket(point, point, 1))

    def _halve(self) -> None:
        pairs = zip(self._buckets[0::2], self._buckets[1::2])
        merged = [a.merged(b) for a, b in pairs]
        if len(self._buckets) % 2:
            merged.append(self._buckets[-1])
        self._buckets = merged
        self._width *= 2

    def points(self) -> tuple[list[float], list[float]]:
        """(steps, values) in step order: every point while the series has at most
        ``max_points / 2`` of them, then each bucket's low and high (at most ``max_points``)."""
        xs: list[float] = []
        ys: list[float] = []
        for bucket in self._buckets:
            for step, value in sorted({bucket.low, bucket.high}):
                xs.append(step)
                ys.append(value)
        return xs, ys
