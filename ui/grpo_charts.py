"""The live view of a GRPO run: its reward chart (the weighted reward's mean with a band of one
standard deviation, and each reward function's mean), its rollout chart (completion length, KL to
the reference and the clipped share) and a table of the latest step's sampled completions with
their rewards, the thing RL users read most. Pure functions of chart points and a progress event."""

from __future__ import annotations

import html
from typing import Any, Optional

import plotly.graph_objects as go

from trainer_core.runs.metrics import ChartPoints
from ui.charts import (
    _figure,
    _mode,
    _x_axis,
    has_preference_points,
    has_retrieval_points,
    preference_figure,
    retrieval_figure,
)

_HOVER = "step %{x:d}<br>%{fullData.name} %{y:.4g}<extra></extra>"


def rewards_figure(points: ChartPoints) -> Optional[go.Figure]:
    """The run's own chart beside the three shared ones: a GRPO run's rewards (``reward_figure``), a
    DPO / ORPO / KTO run's preference rewards (``charts.preference_figure``), an embedding run's
    held-out retrieval metrics (``charts.retrieval_figure``), or None for a run with none of them."""
    if has_retrieval_points(points):
        return retrieval_figure(points)
    if has_grpo_points(points):
        return reward_figure(points)
    return preference_figure(points) if has_preference_points(points) else None


def has_grpo_points(points: ChartPoints) -> bool:
    """Whether the run logged a GRPO reward."""
    return bool(points.get("reward", ([], []))[0])


def reward_figure(points: ChartPoints) -> go.Figure:
    """The weighted reward per step (mean, with a mean +- std band) and each function's mean."""
    x, mean = points.get("reward", ([], []))
    sx, std = points.get("reward_std", ([], []))
    functions = sorted(name for name in points if name.startswith("rewards/"))
    traces = [("reward", x, mean, _mode(x))]
    traces += [(name.removeprefix("rewards/"), *points[name], _mode(points[name][0])) for name in functions]
    figure = _figure("Rewards", "reward", traces, hovertemplate=_HOVER)
    spread = dict(zip(sx, std))
    if x and spread:
        upper = [m + spread.get(step, 0.0) for step, m in zip(x, mean)]
        lower = [m - spread.get(step, 0.0) for step, m in zip(x, mean)]
        band = go.Scatter(
            x=[*x, *reversed(x)],
            y=[*upper, *reversed(lower)],
            fill="toself",
            fillcolor="rgba(99, 110, 250, 0.15)",
            line=dict(width=0),
            hoverinfo="skip",
            name="reward ± std",
        )
        figure.add_trace(band)
        figure.update_layout(yaxis=dict(title="reward", autorange=True))
    return figure


def rollout_figure(points: ChartPoints) -> go.Figure:
    """Mean completion length (tokens, left axis); KL to the reference and the share of clipped
    token ratios (right axis) per step."""
    x, length = points.get("completion_length", ([], []))
    figure = _figure("Completions", "tokens", [("completion length", x, length, _mode(x))], hovertemplate=_HOVER)
    right = [(name, *points.get(key, ([], []))) for name, key in (("KL", "kl"), ("clip ratio", "clip_ratio"))]
    right = [(name, xs, ys) for name, xs, ys in right if xs]
    for name, xs, ys in right:
        if not figure.data:
            figure.update_layout(xaxis=_x_axis(list(xs)), annotations=[])
        figure.add_trace(go.Scatter(x=xs, y=ys, mode=_mode(xs), name=name, yaxis="y2", hovertemplate=_HOVER))
    if right:
        figure.update_layout(
            yaxis2=dict(title="KL / clip ratio", overlaying="y", side="right", showgrid=False),
            margin=dict(l=50, r=50, t=40, b=40),
        )
    return figure


def samples_html(progress: Optional[Any]) -> str:
    """The latest step's sampled completions (``TrainingProgress.samples``) as a table: prompt,
    completion, each reward and the total. Empty when there are none."""
    samples = list(getattr(progress, "samples", None) or [])
    if not samples:
        return ""
    names = list(dict.fromkeys(name for sample in samples for name in sample.rewards))
    head = "".join(f"<th>{html.escape(name)}</th>" for name in ["prompt", "completion", *names, "reward"])
    rows = []
    for sample in samples:
        cells = [
            f"<td class='grpo-text'>{html.escape(sample.prompt)}</td>",
            f"<td class='grpo-text'>{html.escape(sample.completion)}</td>",
        ]
        cells += [f"<td>{_number(sample.rewards.get(name))}</td>" for name in names]
        cells.append(f"<td><strong>{_number(sample.reward)}</strong></td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f"<div class='grpo-samples'><h4>Sampled completions at step {progress.step}</h4>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _number(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.3g}"
