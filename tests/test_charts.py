"""Chart data: incremental min/max downsampling keeps extremes and bounds size; figures carry the
right series."""

import math
import random

import pytest

from trainer_core.runs.metrics import MetricsHistory, chart_points_of
from trainer_core.runs.minmax import MinMaxSeries
from trainer_core.schemas import TrainingProgress
from ui import charts


def _series(values, max_points=500):
    series = MinMaxSeries(max_points)
    for step, value in enumerate(values, start=1):
        series.append(step, value)
    return series.points()


def test_short_series_kept_whole_and_none_dropped():
    assert _series([0.5, None, 0.25]) == ([1, 3], [0.5, 0.25])


@pytest.mark.parametrize("n", [251, 999, 10_000, 100_003])
def test_long_series_bounded_sorted_and_keeps_spikes(n):
    values = [math.sin(x / 500) for x in range(n)]
    spike_hi, spike_lo = random.Random(n).sample(range(n), 2)
    values[spike_hi], values[spike_lo] = 50.0, -50.0
    xs, ys = _series(values)
    assert 125 <= len(xs) <= 500
    assert 50.0 in ys and -50.0 in ys
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    assert all(values[x - 1] == y for x, y in zip(xs, ys))  # real points, not averages


def test_every_bucket_keeps_its_extremes():
    """Against a brute-force min/max over the same equal-width buckets."""
    rng = random.Random(7)
    values = [rng.gauss(0, 1) for _ in range(4096)]
    xs, ys = _series(values, max_points=64)
    kept = dict(zip(xs, ys))
    width = 1
    while math.ceil(len(values) / width) > 32:
        width *= 2
    for start in range(0, len(values), width):
        chunk = values[start:start + width]
        for extreme in (min(chunk), max(chunk)):
            step = start + chunk.index(extreme) + 1
            assert kept.get(step) == extreme


def test_history_chart_points_match_stored_run_points():
    history = MetricsHistory()
    events = [TrainingProgress(job_id="j", step=s, total_steps=2000, loss=1 / s, learning_rate=1e-4, grad_norm=0.5)
              for s in range(1, 2001)] + [TrainingProgress(job_id="j", step=2000, total_steps=2000, eval_loss=0.7)]
    for event in events:
        history.append(event)
    live = history.chart_points()
    assert live == chart_points_of(events)
    assert len(live["loss"][0]) <= 500 and live["loss"][1][0] == 1.0  # the first (highest) loss survives
    assert live["eval_loss"] == ([2000], [0.7])
    history.reset()
    assert history.chart_points()["loss"] == ([], [])


def test_figures_have_series():
    points = {"loss": ([1, 2, 3], [2.0, 1.5, 1.2]), "eval_loss": ([3], [1.4]),
              "learning_rate": ([1, 2, 3], [1e-4, 2e-4, 1e-4]), "grad_norm": ([1, 2], [0.9, 0.8])}
    loss = charts.loss_figure(points)
    assert [t.name for t in loss.data] == ["loss", "eval_loss"]
    assert list(loss.data[0].y) == [2.0, 1.5, 1.2] and list(loss.data[1].x) == [3]
    assert list(charts.learning_rate_figure(points).data[0].y) == [1e-4, 2e-4, 1e-4]
    assert list(charts.grad_norm_figure(points).data[0].x) == [1, 2]
    assert [t.name for t in charts.loss_figure({**points, "eval_loss": ([], [])}).data] == ["loss"]
