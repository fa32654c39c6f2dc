"""Chart building: downsampling keeps extremes and bounds size; figures carry the right series."""

import math

from trainer_core.schemas import MetricHistory
from ui import charts


def test_short_series_kept_whole_and_none_dropped():
    assert charts.downsample([1, 2, 3], [0.5, None, 0.25]) == ([1, 3], [0.5, 0.25])


def test_long_series_bounded_and_keeps_spikes():
    xs = list(range(100_000))
    ys = [math.sin(x / 500) for x in xs]
    ys[77_777] = 50.0  # a spike
    ys[12_345] = -50.0
    dx, dy = charts.downsample(xs, ys, max_points=500)
    assert len(dx) <= 500
    assert 50.0 in dy and -50.0 in dy
    assert dx == sorted(dx)


def test_figures_have_series():
    history = MetricHistory(steps=[1, 2, 3], loss=[2.0, 1.5, 1.2], learning_rate=[1e-4, 2e-4, 1e-4],
                            grad_norm=[0.9, 0.8], grad_norm_steps=[1, 2], eval_loss=[1.4], eval_steps=[3])
    loss = charts.loss_figure(history)
    assert [t.name for t in loss.data] == ["loss", "eval_loss"]
    assert list(loss.data[0].y) == [2.0, 1.5, 1.2] and list(loss.data[1].x) == [3]
    assert list(charts.learning_rate_figure(history).data[0].y) == [1e-4, 2e-4, 1e-4]
    assert list(charts.grad_norm_figure(history).data[0].x) == [1, 2]
