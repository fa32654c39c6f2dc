"""Pure functions: metric history -> Plotly figures (loss with eval loss, learning rate, grad norm).

Each series is downsampled to at most ``MAX_POINTS`` points, keeping every bucket's minimum and
maximum (so spikes survive), which bounds the figure's size whatever the run's length.
"""

from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from trainer_core.schemas import MetricHistory

MAX_POINTS = 500


def downsample(xs: Sequence[float], ys: Sequence[Optional[float]], max_points: int = MAX_POINTS) -> tuple[list, list]:
    """At most ``max_points`` (x, y) pairs: the series itself when short, else per bucket the
    points holding its min and max y, in x order. None values are dropped."""
    pairs = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if len(pairs) <= max_points:
        return [p[0] for p in pairs], [p[1] for p in pairs]
    buckets = max_points // 2
    size = len(pairs) / buckets
    kept: list[tuple] = []
    for b in range(buckets):
        chunk = pairs[int(b * size): int((b + 1) * size)]
        if chunk:
            lo, hi = min(chunk, key=lambda p: p[1]), max(chunk, key=lambda p: p[1])
            kept.extend(sorted({lo, hi}, key=lambda p: p[0]))
    return [p[0] for p in kept], [p[1] for p in kept]


def _mode(xs: list) -> str:
    """Markers too while a series is short, so the first step is visible."""
    return "lines+markers" if len(xs) <= 20 else "lines"


def _figure(title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_title="step", yaxis_title=y_title, height=300,
                      margin=dict(l=50, r=20, t=40, b=40), legend=dict(orientation="h", y=-0.25))
    return fig


def loss_figure(history: MetricHistory) -> go.Figure:
    """Training loss per step, with evaluation loss as markers."""
    fig = _figure("Loss", "loss")
    x, y = downsample(history.steps, history.loss)
    fig.add_trace(go.Scatter(x=x, y=y, mode=_mode(x), name="loss"))
    if history.eval_loss:
        x, y = downsample(history.eval_steps, history.eval_loss)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name="eval_loss"))
    return fig


def learning_rate_figure(history: MetricHistory) -> go.Figure:
    """Learning rate per step."""
    fig = _figure("Learning rate", "learning_rate")
    x, y = downsample(history.steps, history.learning_rate)
    fig.add_trace(go.Scatter(x=x, y=y, mode=_mode(x), name="learning_rate"))
    fig.update_yaxes(exponentformat="e")
    return fig


def grad_norm_figure(history: MetricHistory) -> go.Figure:
    """Gradient norm (before clipping) per step."""
    fig = _figure("Gradient norm", "grad_norm")
    x, y = downsample(history.grad_norm_steps, history.grad_norm)
    fig.add_trace(go.Scatter(x=x, y=y, mode=_mode(x), name="grad_norm"))
    return fig
