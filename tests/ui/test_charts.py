"""Chart data: incremental min/max downsampling keeps extremes and bounds size; figures carry the
right series."""

import math
import random

import pytest

from trainer_core.runs.metrics import MetricsHistory, chart_points_of, series_of
from trainer_core.runs.minmax import MinMaxSeries
from trainer_core.status import TrainingProgress
from ui import charts, grpo_charts


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
        chunk = values[start : start + width]
        for extreme in (min(chunk), max(chunk)):
            step = start + chunk.index(extreme) + 1
            assert kept.get(step) == extreme


def test_history_chart_points_match_stored_run_points():
    history = MetricsHistory()
    events = [
        TrainingProgress(job_id="j", step=s, total_steps=2000, loss=1 / s, learning_rate=1e-4, grad_norm=0.5)
        for s in range(1, 2001)
    ] + [TrainingProgress(job_id="j", step=2000, total_steps=2000, eval_loss=0.7)]
    for event in events:
        history.append(event)
    live = history.chart_points()
    assert live == chart_points_of(events)
    assert len(live["loss"][0]) <= 500 and live["loss"][1][0] == 1.0  # the first (highest) loss survives
    assert live["eval_loss"] == ([2000], [0.7])
    history.reset()
    assert history.chart_points()["loss"] == ([], [])


def test_figures_have_series():
    points = {
        "loss": ([1, 2, 3], [2.0, 1.5, 1.2]),
        "eval_loss": ([3], [1.4]),
        "learning_rate": ([1, 2, 3], [1e-4, 2e-4, 1e-4]),
        "grad_norm": ([1, 2], [0.9, 0.8]),
    }
    loss = charts.loss_figure(points)
    assert [t.name for t in loss.data] == ["loss", "eval_loss"]
    assert list(loss.data[0].y) == [2.0, 1.5, 1.2] and list(loss.data[1].x) == [3]
    assert list(charts.learning_rate_figure(points).data[0].y) == [1e-4, 2e-4, 1e-4]
    assert list(charts.grad_norm_figure(points).data[0].x) == [1, 2]
    assert [t.name for t in charts.loss_figure({**points, "eval_loss": ([], [])}).data] == ["loss"]


def test_an_embedding_runs_chart_shows_its_retrieval_metrics_and_eval_loss():
    train = [
        TrainingProgress(job_id="j", step=s, total_steps=4, loss=2.0 / s, learning_rate=1e-4) for s in (1, 2, 3, 4)
    ]
    evals = [
        TrainingProgress(job_id="j", step=s, total_steps=4, eval_loss=loss, eval_ndcg_at_10=ndcg, eval_recall_at_1=r1)
        for s, loss, ndcg, r1 in ((2, 1.8, 0.5, 0.25), (4, 1.6, 0.625, 0.5))
    ]
    events = [train[0], train[1], evals[0], train[2], train[3], evals[1]]
    points = chart_points_of(events)
    assert points["eval_ndcg_at_10"] == ([2, 4], [0.5, 0.625]) and points["eval_mrr_at_10"] == ([], [])
    figure = grpo_charts.rewards_figure(points)  # the monitor's and the Runs tab's run-kind chart
    assert [t.name for t in figure.data] == ["ndcg_at_10", "recall_at_1", "eval_loss"]
    assert list(figure.data[0].y) == [0.5, 0.625] and list(figure.data[2].y) == [1.8, 1.6]
    assert figure.data[2].yaxis == "y2" and figure.layout.title.text == "Held-out retrieval"
    history = series_of(events)  # the API's /metrics and /status series
    assert history.eval_steps == [2, 4] and history.eval_ndcg_at_10 == [0.5, 0.625]
    assert history.eval_mrr_at_10 == [None, None] and history.loss == [2.0, 1.0, 2.0 / 3, 0.5]
    text = chart_points_of(train + [TrainingProgress(job_id="j", step=4, total_steps=4, eval_loss=1.6)])
    assert not charts.has_retrieval_points(text) and grpo_charts.rewards_figure(text) is None
    assert series_of(train).eval_ndcg_at_10 == []


# --- axes: integer step ticks, single-point ranges, empty state, readable learning rate --------------

FIGURES = (charts.loss_figure, charts.learning_rate_figure, charts.grad_norm_figure)


def _points(xs, ys=None, eval_xs=(), eval_ys=()):
    ys = list(ys) if ys is not None else [1.0 / (i + 1) for i in range(len(xs))]
    series = (list(xs), ys)
    return {"loss": series, "eval_loss": (list(eval_xs), list(eval_ys)), "learning_rate": series, "grad_norm": series}


def _ticks(axis):
    """The tick values Plotly draws for a linear axis: tick0 + k * dtick inside the range."""
    assert axis.tickmode == "linear"
    lo, hi = axis.range
    tick0, dtick = axis.tick0, axis.dtick
    k = math.ceil((lo - tick0) / dtick)
    ticks = []
    while tick0 + k * dtick <= hi:
        ticks.append(tick0 + k * dtick)
        k += 1
    return ticks


@pytest.mark.parametrize("steps", [1, 2, 3, 7, 17, 1000, 100_000])
@pytest.mark.parametrize("figure", FIGURES)
def test_step_axis_has_integer_ticks_only(figure, steps):
    xs = [1, steps] if steps > 1 else [1]
    axis = figure(_points(xs)).layout.xaxis
    ticks = _ticks(axis)
    assert 1 <= len(ticks) <= charts.MAX_X_TICKS
    assert all(float(t).is_integer() for t in ticks)
    assert len(set(ticks)) == len(ticks)
    assert isinstance(axis.dtick, int) and axis.dtick >= 1 and float(axis.tick0).is_integer()
    assert axis.tickformat == "d" and axis.hoverformat == "d"
    lo, hi = axis.range
    assert lo <= 1 and hi >= steps and lo >= 0


@pytest.mark.parametrize("span, dtick", [(0.5, 1), (2, 1), (7, 1), (8, 2), (17, 5), (1000, 200), (100_000, 20_000)])
def test_nice_dtick(span, dtick):
    assert charts.nice_dtick(span) == dtick


def test_single_point_learning_rate_range_is_readable():
    fig = charts.learning_rate_figure(_points([5], [2e-4]))
    assert list(fig.layout.xaxis.range) == [4, 6]
    lo, hi = fig.layout.yaxis.range
    assert lo < 2e-4 < hi and lo > 0  # excludes 0, so not [-1, 1]
    assert [lo, hi] != [-1, 1] and fig.layout.yaxis.autorange is False
    assert fig.layout.yaxis.exponentformat == "e"
    assert "%{x:d}" in fig.data[0].hovertemplate


def test_single_point_at_step_one_and_zero_value():
    fig = charts.grad_norm_figure(_points([1], [0.0]))
    assert list(fig.layout.xaxis.range) == [0, 2]  # not below 0
    assert list(fig.layout.yaxis.range) == [-1, 1]  # +-1 only around 0
    assert "%{x:d}" in fig.data[0].hovertemplate


def test_all_equal_values_get_a_range_around_the_value():
    fig = charts.learning_rate_figure(_points([1, 2, 3], [3e-5] * 3))
    lo, hi = fig.layout.yaxis.range
    assert 0 < lo < 3e-5 < hi
    varied = charts.learning_rate_figure(_points([1, 2, 3], [1e-4, 2e-4, 1e-4]))
    assert varied.layout.yaxis.range is None  # distinct values: Plotly's autorange


@pytest.mark.parametrize("figure", FIGURES)
def test_empty_figure_shows_no_steps_yet(figure):
    fig = figure(_points([]))
    assert [a.text for a in fig.layout.annotations] == ["no steps yet"]
    assert fig.layout.title.text  # the figure keeps its title
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.visible is False and axis.showgrid is False and axis.showticklabels is False
    assert len(fig.data) == 0


def test_eval_loss_only_is_not_empty():
    fig = charts.loss_figure(_points([], eval_xs=[10], eval_ys=[1.4]))
    assert not fig.layout.annotations
    assert [t.name for t in fig.data] == ["eval_loss"]
    assert fig.layout.xaxis.visible is not False
    assert list(fig.layout.xaxis.range) == [9, 11]
    lo, hi = fig.layout.yaxis.range
    assert lo < 1.4 < hi


def test_loss_axis_spans_train_and_eval_steps():
    fig = charts.loss_figure(_points([1, 2, 3], eval_xs=[5], eval_ys=[1.4]))
    lo, hi = fig.layout.xaxis.range
    assert lo <= 1 and hi >= 5
    assert all(float(t).is_integer() for t in _ticks(fig.layout.xaxis))


@pytest.mark.parametrize("figure", FIGURES)
def test_figures_keep_their_title(figure):
    assert figure(_points([1, 2])).layout.title.text
