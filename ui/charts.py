"""Pure functions: chart points -> Plotly figures (loss with eval loss, learning rate, grad norm).

The points come already downsampled (``MetricsHistory.chart_points``: at most
``minmax.MAX_POINTS`` per series, spikes kept), so a figure's cost and size do not grow with the run.
"""

from __future__ import annotations

import plotly.graph_objects as go

from trainer_core.runs.metrics import ChartPoints


def _mode(xs: list) -> str:
    """Markers too while a series is short, so the first step is visible."""
    return "lines+markers" if len(xs) <= 20 else "lines"


def _figure(title: str, y_title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_title="step", yaxis_title=y_title, height=300,
                      margin=dict(l=50, r=20, t=40, b=40), legend=dict(orientation="h", y=-0.25))
    return fig


def loss_figure(points: ChartPoints) -> go.Figure:
    """Training loss per step, with evaluation loss as markers."""
    fig = _figure("Loss", "loss")
    x, y = points["loss"]
    fig.add_trace(go.Scatter(x=x, y=y, mode=_mode(x), name="loss"))
    x, y = points["eval_loss"]
    if x:
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name="eval_loss"))
    return fig


def learning_rate_figure(points: ChartPoints) -> go.Figure:
    """Learning rate per step."""
    fig = _figure("Learning rate", "learning_rate")
    x, y = points["learning_rate"]
    fig.add_trace(go.Scatter(x=x, y=y, mode=_mode(x), name="learning_rate"))
    fig.update_yaxes(exponentformat="e")
    return fig


def grad_norm_figure(points: ChartPoints) -> go.Figure:
    """Gradient norm (before clipping) per step."""
    fig = _figure("Gradient norm", "grad_norm")
    x, y = points["grad_norm"]
    fig.add_trace(go.Scatter(x=x, y=y, mode=_mode(x), name="grad_norm"))
    return fig
