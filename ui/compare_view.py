"""Pure functions for the Runs tab's comparison: downsampled curves -> one Plotly figure, runs ->
the settings-diff table.

One colour per run (Plotly's qualitative palette, ten colours for ``compare.MAX_RUNS`` runs). Each
run draws its raw loss faint (opacity ``RAW_OPACITY``, no legend entry), its smoothed loss solid
(legend = the run's name) and its eval loss dashed with markers, all in one legend group, so a click
on the legend hides or shows the whole run. Run names are user text: Plotly renders a small set of
HTML tags in trace names, so names are escaped before they reach the figure.
"""

from __future__ import annotations

import html
from typing import Optional

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from trainer_core.runs.compare import Curve, XAxis, config_diff
from trainer_core.runs.store import RunRecord
from ui.charts import EMPTY_TEXT

COLOURS = qualitative.Plotly  # 10 colours
RAW_OPACITY = 0.25
X_TITLES = {"step": "step", "tokens": "input tokens seen"}
EMPTY_DIFF = pd.DataFrame(columns=["setting"])
_HIDDEN_AXIS = dict(visible=False, showgrid=False, showticklabels=False, zeroline=False)


def _mode(xs: list) -> str:
    """Lines, with markers when a single point would draw nothing."""
    return "lines+markers" if len(xs) == 1 else "lines"


def _traces(curve: Curve, colour: str, smoothed: bool) -> list[dict]:
    """A run's traces: raw loss (faint when ``smoothed``, else the solid line itself), the EMA, eval loss."""
    name = html.escape(curve.label)
    hover = f"{name}<br>%{{x}}: %{{y:.4f}}<extra></extra>"
    common = dict(type="scatter", legendgroup=curve.job_id, line=dict(color=colour), hovertemplate=hover)
    traces = []
    if curve.raw[0]:
        traces.append(
            dict(
                x=curve.raw[0],
                y=curve.raw[1],
                mode=_mode(curve.raw[0]),
                name=f"{name} raw" if smoothed else name,
                showlegend=not smoothed,
                opacity=RAW_OPACITY if smoothed else 1.0,
                **common,
            )
        )
    if smoothed and curve.smoothed[0]:
        traces.append(
            dict(x=curve.smoothed[0], y=curve.smoothed[1], mode=_mode(curve.smoothed[0]), name=name, **common)
        )
    if curve.eval[0]:
        traces.append(
            dict(
                type="scatter",
                x=curve.eval[0],
                y=curve.eval[1],
                mode="lines+markers",
                name=f"{name} eval",
                legendgroup=curve.job_id,
                hovertemplate=f"{name} eval<br>%{{x}}: %{{y:.4f}}<extra></extra>",
                line=dict(color=colour, dash="dash"),
                marker=dict(size=5, color=colour),
            )
        )
    return traces


def overlay_figure(curves: list[Curve], x_axis: XAxis = "step", smoothing: float = 0.0, height: int = 420) -> go.Figure:
    """Every run's loss (raw faint + EMA when ``smoothing`` > 0) and eval loss against ``x_axis``
    (steps or input tokens seen), ``height`` pixels tall; "no steps yet" on hidden axes when no run
    has a point (on the tokens axis: none counted tokens). Built from plain dicts without Plotly's
    per-trace validation (which took ~200 ms for 30 traces here; the traces' keys are fixed above)."""
    smoothed = smoothing > 0
    data = [t for i, c in enumerate(curves) for t in _traces(c, COLOURS[i % len(COLOURS)], smoothed)]
    title = "Loss by run" + (f" (smoothing {smoothing:.2f})" if smoothed else "")
    layout = dict(
        title=dict(text=title),
        height=height,
        margin=dict(l=50, r=20, t=40, b=40),
        hovermode="closest",
        legend=dict(orientation="h", y=-0.2),
    )
    if not data:
        text = EMPTY_TEXT if x_axis == "step" else "no token counts logged"
        layout.update(
            xaxis=_HIDDEN_AXIS,
            yaxis=_HIDDEN_AXIS,
            annotations=[
                dict(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=14))
            ],
        )
    else:
        layout.update(
            xaxis=dict(title=dict(text=X_TITLES[x_axis]), rangemode="tozero"), yaxis=dict(title=dict(text="loss"))
        )
    return go.Figure(dict(data=data, layout=layout), _validate=False)


def diff_frame(runs: list[RunRecord], finals: Optional[list[dict[str, float]]] = None) -> pd.DataFrame:
    """``compare.config_diff`` (with ``finals``: ``compare.final_values``) as a DataFrame (text
    cells); an empty table for no runs."""
    if not runs:
        return EMPTY_DIFF
    columns, rows = config_diff(runs, finals)
    return pd.DataFrame(rows, columns=columns)
