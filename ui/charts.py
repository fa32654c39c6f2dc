"""Pure functions: chart points -> Plotly figures (loss with eval loss, learning rate, grad norm).

The points come already downsampled (``MetricsHistory.chart_points``: at most
``minmax.MAX_POINTS`` per series, spikes kept), so a figure's cost and size do not grow with the run.

Each figure is built in one ``go.Figure(data, layout)`` call (it is rebuilt on every step for every
watching tab). Axes are set from the data rather than left to Plotly's autorange where autorange
goes wrong: the step axis gets an explicit range and an integer ``dtick`` (steps are integers, so no
0.5 ticks), a single point or all-equal values get a range around the value (Plotly would show
-1..1, which renders a 2e-4 learning rate as 0), and a figure with no points shows "no steps yet"
on hidden axes. The figure keeps its title (readable alone, e.g. in a screenshot); the ``gr.Plot``
holding it shows no label.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from trainer_core.runs.metrics import ChartPoints
from trainer_core.status import EMBEDDING_EVAL_SERIES

EMPTY_TEXT = "no steps yet"
MAX_X_TICKS = 8
_X_PAD = 0.02  # fraction of the step span added on each side, so edge markers are not cut
_Y_PAD = 0.1  # single point / all-equal values: value +- this fraction of |value|

_HIDDEN_AXIS = dict(visible=False, showgrid=False, showticklabels=False, ticks="", zeroline=False, showline=False)


def _mode(xs: list) -> str:
    """Markers too while a series is short, so the first step is visible."""
    return "lines+markers" if len(xs) <= 20 else "lines"


def nice_dtick(span: float, max_ticks: int = MAX_X_TICKS) -> int:
    """The smallest 1, 2 or 5 x 10^n (at least 1) that puts at most ``max_ticks`` ticks on ``span``."""
    target = span / max(max_ticks - 1, 1)
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            if factor * magnitude >= target:
                return factor * magnitude
        magnitude *= 10


def _x_axis(xs: list) -> dict:
    """Step axis: explicit range around the steps, integer ticks from 0 every ``nice_dtick``."""
    lo, hi = min(xs), max(xs)
    if lo == hi:
        start, end = max(lo - 1, 0), hi + 1
    else:
        pad = (hi - lo) * _X_PAD
        start, end = (max(lo - pad, 0) if lo >= 0 else lo - pad), hi + pad
    return dict(
        title="step",
        range=[start, end],
        autorange=False,
        tickmode="linear",
        tick0=0,
        dtick=nice_dtick(end - start),
        tickformat="d",
        hoverformat="d",
    )


def _y_axis(ys: list, title: str) -> dict:
    """Autorange, except for one value (or all equal): value +- a fraction of it (+-1 around 0)."""
    axis = dict(title=title)
    lo, hi = min(ys), max(ys)
    if lo == hi and math.isfinite(lo):
        half = abs(lo) * _Y_PAD or 1.0
        axis.update(range=[lo - half, lo + half], autorange=False)
    return axis


def _figure(
    title: str,
    y_title: str,
    traces: list[tuple[str, list, list, str]],
    hovertemplate: str | None = None,
    y_extra: dict | None = None,
    height: int = 240,
) -> go.Figure:
    """``traces``: (name, xs, ys, mode); empty series are left out. No points at all: the empty
    state. ``height`` in pixels (the monitor column shows all three charts in one screen)."""
    traces = [t for t in traces if t[1]]
    layout = dict(
        title=title, height=height, margin=dict(l=50, r=20, t=40, b=40), legend=dict(orientation="h", y=-0.25)
    )
    if not traces:
        layout.update(
            xaxis=_HIDDEN_AXIS,
            yaxis=_HIDDEN_AXIS,
            annotations=[
                dict(text=EMPTY_TEXT, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=14))
            ],
        )
        return go.Figure(layout=layout)
    xs = [x for _, t_xs, _, _ in traces for x in t_xs]
    ys = [y for _, _, t_ys, _ in traces for y in t_ys]
    layout.update(xaxis=_x_axis(xs), yaxis={**_y_axis(ys, y_title), **(y_extra or {})})
    data = [
        go.Scatter(x=t_xs, y=t_ys, mode=mode, name=name, hovertemplate=hovertemplate)
        for name, t_xs, t_ys, mode in traces
    ]
    return go.Figure(data=data, layout=layout)


def loss_figure(points: ChartPoints) -> go.Figure:
    """Training loss per step, with evaluation loss as markers."""
    x, y = points["loss"]
    ex, ey = points["eval_loss"]
    return _figure("Loss", "loss", [("loss", x, y, _mode(x)), ("eval_loss", ex, ey, "lines+markers")])


def learning_rate_figure(points: ChartPoints) -> go.Figure:
    """Learning rate per step; ticks in e-notation (2e-4, never rounded to 0)."""
    x, y = points["learning_rate"]
    return _figure(
        "Learning rate",
        "learning_rate",
        [("learning_rate", x, y, _mode(x))],
        hovertemplate="step %{x:d}<br>learning_rate %{y:.3e}<extra></extra>",
        y_extra=dict(exponentformat="e", showexponent="all", hoverformat=".3e"),
    )


def grad_norm_figure(points: ChartPoints) -> go.Figure:
    """Gradient norm (before clipping) per step."""
    x, y = points["grad_norm"]
    return _figure(
        "Gradient norm",
        "grad_norm",
        [("grad_norm", x, y, _mode(x))],
        hovertemplate="step %{x:d}<br>grad_norm %{y:.4g}<extra></extra>",
    )


REWARD_SERIES = ("rewards_chosen", "rewards_rejected", "rewards_margins", "kl")


def has_preference_points(points: ChartPoints) -> bool:
    """Whether the run logged any preference metric (a DPO / ORPO / KTO run)."""
    return any(points.get(name, ([], []))[0] for name in (*REWARD_SERIES, "rewards_accuracies"))


def preference_figure(points: ChartPoints) -> go.Figure:
    """DPO / ORPO / KTO metrics per step (TRL's rewards/chosen, rewards/rejected, rewards/margins and
    KTO's kl, in reward units: beta x log-probability ratio to the reference) on the left axis, and
    rewards/accuracies (share of pairs whose chosen reward wins, 0..1) dotted on a right axis."""
    traces = [
        (name.removeprefix("rewards_"), *points.get(name, ([], [])), _mode(points.get(name, ([], []))[0]))
        for name in REWARD_SERIES
    ]
    figure = _figure(
        "Preference rewards", "reward", traces, hovertemplate="step %{x:d}<br>%{fullData.name} %{y:.4g}<extra></extra>"
    )
    ax, ay = points.get("rewards_accuracies", ([], []))
    if ax:
        if not figure.data:  # accuracies alone: give the figure its step axis
            figure.update_layout(xaxis=_x_axis(list(ax)), yaxis=dict(title="reward"), annotations=[])
        figure.add_trace(
            go.Scatter(
                x=ax,
                y=ay,
                mode=_mode(ax),
                name="accuracies",
                yaxis="y2",
                line=dict(dash="dot"),
                hovertemplate="step %{x:d}<br>accuracies %{y:.2f}<extra></extra>",
            )
        )
        figure.update_layout(
            yaxis2=dict(title="accuracy", overlaying="y", side="right", range=[0, 1.05], showgrid=False),
            margin=dict(l=50, r=50, t=40, b=40),
        )
    return figure


def has_retrieval_points(points: ChartPoints) -> bool:
    """Whether the run logged a held-out retrieval metric (an embedding run)."""
    return any(points.get(name, ([], []))[0] for name in EMBEDDING_EVAL_SERIES)


def retrieval_figure(points: ChartPoints) -> go.Figure:
    """An embedding run's held-out evaluation per eval step: its retrieval metrics (nDCG@10, MRR@10,
    recall@1 / @10, Spearman for scored pairs; sentence-transformers' evaluators, cosine similarity)
    on the left axis, and eval_loss (nats) dotted on a right axis where logged."""
    traces = [
        (name.removeprefix("eval_"), *points.get(name, ([], [])), "lines+markers") for name in EMBEDDING_EVAL_SERIES
    ]
    figure = _figure(
        "Held-out retrieval",
        "metric",
        traces,
        hovertemplate="step %{x:d}<br>%{fullData.name} %{y:.4f}<extra></extra>",
    )
    ex, ey = points.get("eval_loss", ([], []))
    if ex and figure.data:
        figure.add_trace(
            go.Scatter(
                x=ex,
                y=ey,
                mode="lines+markers",
                name="eval_loss",
                yaxis="y2",
                line=dict(dash="dot"),
                hovertemplate="step %{x:d}<br>eval_loss %{y:.4f}<extra></extra>",
            )
        )
        figure.update_layout(
            yaxis2=dict(title="eval_loss", overlaying="y", side="right", showgrid=False),
            margin=dict(l=50, r=50, t=40, b=40),
        )
    return figure
