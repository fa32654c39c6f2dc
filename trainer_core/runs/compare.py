"""Comparing runs (pure functions, no UI): each run's loss and eval-loss series against steps or
tokens seen, TensorBoard's debiased EMA smoothing, downsampling for charts, and the settings that
differ between runs with their outcome (final loss, best eval loss, runtime, tokens/s; an embedding
run's last retrieval metrics).

A finished run's series are read from its packed arrays (``RunStore.packed_series``, numpy arrays
kept in the store when the run ended, ``series_store``); a live run's from the store's lean query
(``RunStore.loss_rows``: step, loss, eval_loss, num_tokens per event, no pydantic model per event).
Both give the same series (``series_of`` / ``series_of_packed``). Smoothing runs on the
full-resolution series; the raw and the smoothed series are then downsampled with the live charts' min/max decimation
(``minmax.MinMaxSeries``'s buckets, computed for a whole series at once), so a figure's size does
not grow with the runs' length.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import numpy as np

from trainer_core.runs.minmax import MAX_POINTS
from trainer_core.runs.series_store import HAS_EVAL_LOSS, HAS_LOSS, HAS_TOKENS, LossRow, PackedSeries
from trainer_core.runs.store import RunRecord, RunStore, status_word
from trainer_core.status import EMBEDDING_EVAL_SERIES

XAxis = Literal["step", "tokens"]
X_AXES: tuple[str, ...] = ("step", "tokens")
MAX_RUNS = 10  # runs in one comparison
MAX_SMOOTHING = 0.99
COMPARE_POINTS = MAX_POINTS  # per series and run after downsampling, as the live charts
SUMMARY_ROWS = ("final loss", "best eval loss", "training time (s)", "tokens/s")
FINAL_SERIES = EMBEDDING_EVAL_SERIES  # logged metrics whose last value the table shows, where a run has one


@dataclass
class RunSeries:
    """One run's curves at full resolution. ``x`` / ``loss``: train events; ``eval_x`` /
    ``eval_loss``: eval events. x values are steps or input tokens seen (``x_axis``); events
    without a token count are left out of a tokens series (an eval event takes the tokens of the
    newest train event before it). Losses are nats per token."""

    job_id: str
    label: str
    x: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    eval_x: list[float] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)


@dataclass
class Curve:
    """A run's downsampled curves for one figure: raw and smoothed loss, eval loss, each (xs, ys)."""

    job_id: str
    label: str
    raw: tuple[list[float], list[float]]
    smoothed: tuple[list[float], list[float]]
    eval: tuple[list[float], list[float]]


def run_label(run: RunRecord) -> str:
    """The name a run goes by in legends and columns: its name, else its job id."""
    return run.name or run.job_id


def series_of(job_id: str, label: str, rows: Iterable[LossRow], x_axis: XAxis = "step") -> RunSeries:
    """``rows`` (``RunStore.loss_rows``) as a ``RunSeries`` against ``x_axis``; non-finite losses
    are kept (smoothing passes them through) but rows without an x value are not."""
    if x_axis not in X_AXES:
        raise ValueError(f"x_axis must be one of {X_AXES}, got {x_axis!r}")
    series = RunSeries(job_id, label)
    if x_axis == "step":  # the common case, without a per-row Python loop body
        rows = rows if isinstance(rows, list) else list(rows)
        train = [r for r in rows if r[1] is not None]
        evals = [r for r in rows if r[2] is not None]
        series.x, series.loss = [r[0] for r in train], [r[1] for r in train]
        series.eval_x, series.eval_loss = [r[0] for r in evals], [r[2] for r in evals]
        return series
    tokens: Optional[float] = None
    for _step, loss, eval_loss, num_tokens in rows:
        if loss is not None and num_tokens is not None:
            tokens = num_tokens
        x = num_tokens if loss is not None else tokens
        if x is None:
            continue
        if loss is not None:
            series.x.append(x)
            series.loss.append(loss)
        if eval_loss is not None:
            series.eval_x.append(x)
            series.eval_loss.append(eval_loss)
    return series


def series_of_packed(job_id: str, label: str, packed: PackedSeries, x_axis: XAxis = "step") -> RunSeries:
    """``series_of`` for a run's packed events (``RunStore.packed_series``), with numpy masks
    instead of a loop per event; gives exactly ``series_of(job_id, label, packed.rows(), x_axis)``."""
    if x_axis not in X_AXES:
        raise ValueError(f"x_axis must be one of {X_AXES}, got {x_axis!r}")
    train, evals = packed.has(HAS_LOSS), packed.has(HAS_EVAL_LOSS)  # (n,) bool each
    if x_axis == "step":
        x, has_x = packed.steps, np.ones(train.shape, dtype=bool)
    else:  # a train event's own token count; other events take the newest train event's count before them
        counted = train & packed.has(HAS_TOKENS)
        newest = np.maximum.accumulate(np.where(counted, np.arange(counted.size), -1))  # (n,) index or -1
        x = packed.num_tokens[np.maximum(newest, 0)] if newest.size else packed.num_tokens
        has_x = np.where(train, counted, newest >= 0)
    train, evals = train & has_x, evals & has_x
    return RunSeries(
        job_id,
        label,
        x[train].tolist(),
        packed.loss[train].tolist(),
        x[evals].tolist(),
        packed.eval_loss[evals].tolist(),
    )


def _read_series(store: RunStore, run: RunRecord, x_axis: XAxis) -> RunSeries:
    """One run's series: from its packed arrays when finished, else from the lean query."""
    packed = store.packed_series(run.job_id) if run.finished_at is not None else None
    if packed is not None:
        return series_of_packed(run.job_id, run_label(run), packed, x_axis)
    return series_of(run.job_id, run_label(run), store.loss_rows(run.job_id), x_axis)


def load_series(store: RunStore, runs: list[RunRecord], x_axis: XAxis = "step") -> list[RunSeries]:
    """Each run's series from ``store``: a finished run's packed arrays (one row per run), a live
    run's lean query. ``ValueError`` for an ``x_axis`` not in ``X_AXES``."""
    return [_read_series(store, run, x_axis) for run in runs]


class SeriesCache:
    """``load_series`` that keeps the series of finished runs (their steps no longer change; a
    resume clears ``finished_at``, so the key changes), the newest ``size`` of them; thread-safe.
    Reading the packed arrays of 10 runs of 10,000 steps takes a few ms, a cached read ~0
    (``bench/compare.py``)."""

    def __init__(self, size: int = 2 * MAX_RUNS) -> None:
        self._size = size
        self._kept: OrderedDict[tuple, RunSeries] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every kept series (the next ``load`` reads the store)."""
        with self._lock:
            self._kept.clear()

    def load(self, store: RunStore, runs: list[RunRecord], x_axis: XAxis = "step") -> list[RunSeries]:
        """Each run's series against ``x_axis``, from the cache where it holds the finished run."""
        found = []
        for run in runs:
            key = (str(store.path), run.job_id, run.finished_at, x_axis)
            with self._lock:
                series = self._kept.get(key) if run.finished_at is not None else None
                if series is not None:
                    self._kept.move_to_end(key)
            if series is None:
                series = _read_series(store, run, x_axis)
                if run.finished_at is not None:
                    with self._lock:
                        self._kept[key] = series
                        while len(self._kept) > self._size:
                            self._kept.popitem(last=False)
            found.append(
                RunSeries(series.job_id, run_label(run), series.x, series.loss, series.eval_x, series.eval_loss)
            )
        return found


SHARED = SeriesCache()  # the app's one cache (the Runs tab and the API read the same runs)


def ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's smoothing: a debiased exponential moving average, same length as ``values``.

    ``last = last * weight + (1 - weight) * x``; the n-th finite value is divided by
    ``1 - weight ** n`` so the start is not pulled towards 0. Non-finite values pass through
    unchanged and do not count; all-equal values are returned as they are. ``weight`` in [0, 1)
    (0: no smoothing); ``ValueError`` otherwise. Source: TensorBoard's
    ``tensorboard/components/vz_line_chart2/line-chart.ts``, ``resmoothDataset`` (commit 34877f1,
    line 699), the same formula W&B documents as "Exponential Moving Average - Tensorboard".
    Computed with numpy in blocks (``_ema_state``), equal to that loop within 1e-12 relative."""
    if not 0 <= weight < 1:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    y = np.asarray(values, dtype=float)  # (n,)
    finite = np.isfinite(y)
    if weight == 0 or not finite.any() or y[finite].min() == y[finite].max():
        return list(values)
    decay = np.cumprod(np.full(int(finite.sum()), weight))  # weight ** (finite values so far)
    out = y.copy()
    out[finite] = _ema_state(y[finite], weight) / (1 - decay)
    return out.tolist()


def _ema_state(x: np.ndarray, weight: float) -> np.ndarray:
    """``last`` of ``ema`` after each of the finite values ``x`` (n,), from ``last = 0``, without a
    Python loop per value: within blocks of B values, ``last_k = (1 - w) * w**k * cumsum(x_j *
    w**-j)`` (B chosen so ``w**-B <= 1e15``: relative error about B * 1e-16), then each block adds
    the previous block's final state times ``w**k`` (a loop per block). Agrees with the loop to
    1e-12 relative (``tests/trainer_core/runs/test_compare.py``)."""
    n = x.size
    block = max(1, min(n, int(15 / -math.log10(weight))))
    blocks = -(-n // block)
    padded = np.zeros(blocks * block)
    padded[:n] = x
    k = np.arange(1, block + 1, dtype=float)
    fall = weight**k  # (B,)
    local = np.cumsum(padded.reshape(blocks, block) / fall, axis=1) * fall * (1 - weight)  # (blocks, B), each from 0
    carry, state, across = np.empty(blocks), 0.0, weight**block
    for b, end in enumerate(local[:, -1].tolist()):
        carry[b] = state
        state = state * across + end
    return (local + carry[:, None] * fall).ravel()[:n]


def downsample(xs: list[float], ys: list[float], max_points: int = COMPARE_POINTS) -> tuple[list[float], list[float]]:
    """(xs, ys) cut to at most ``max_points`` points by the live charts' min/max decimation
    (``minmax.MinMaxSeries``: buckets of a power-of-two width, each keeping its first lowest and
    first highest point, in step order), computed in one pass with numpy for a whole series; the
    tests check it gives ``MinMaxSeries``'s points exactly. Non-finite values are never a bucket's
    low or high unless the whole bucket is non-finite."""
    n = len(xs)
    if n <= max_points // 2:
        return list(xs), list(ys)
    width = 1
    while -(-n // width) > max_points // 2:
        width *= 2
    y = np.asarray(ys, dtype=float)
    finite = np.isfinite(y)
    padded = -(-n // width) * width
    for_low = np.full(padded, np.inf)
    for_low[:n] = np.where(finite, y, np.inf)
    for_high = np.full(padded, -np.inf)
    for_high[:n] = np.where(finite, y, -np.inf)
    starts = np.arange(0, padded, width)
    low = np.argmin(for_low.reshape(-1, width), axis=1) + starts  # (buckets,)
    high = np.argmax(for_high.reshape(-1, width), axis=1) + starts
    x = np.asarray(xs, dtype=float)
    high_first = (x[high] < x[low]) | ((x[high] == x[low]) & (y[high] < y[low]))
    first, second = np.where(high_first, high, low), np.where(high_first, low, high)
    order = np.stack([first, second], axis=1).ravel()  # (2 * buckets,)
    keep = np.ones(order.size, dtype=bool)
    keep[1::2] = second != first
    chosen = order[keep]
    return [xs[i] for i in chosen.tolist()], [ys[i] for i in chosen.tolist()]


def curves(series: list[RunSeries], smoothing: float = 0.0, max_points: int = COMPARE_POINTS) -> list[Curve]:
    """Each run's raw loss, its EMA (``smoothing`` weight, on the full series) and its eval loss,
    all downsampled to at most ``max_points`` points."""
    return [
        Curve(
            s.job_id,
            s.label,
            downsample(s.x, s.loss, max_points),
            downsample(s.x, ema(s.loss, smoothing), max_points),
            downsample(s.eval_x, s.eval_loss, max_points),
        )
        for s in series
    ]


def _shown(value: Any) -> str:
    """A setting's value as one cell of text (lists joined, None as a dash)."""
    if value is None:
        return "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "—"
    return str(value)


def _summary(run: RunRecord) -> list[str]:
    """The outcome rows of ``SUMMARY_ROWS`` for ``run``, as text rounded for reading."""
    values = [(run.final_loss, 4), (run.best_eval_loss, 4), (run.training_seconds, 1), (run.tokens_per_second, 1)]
    return [_shown(None if value is None else round(value, digits)) for value, digits in values]


def final_values(store: RunStore, runs: list[RunRecord]) -> list[dict[str, float]]:
    """Per run, the last logged value of each ``FINAL_SERIES`` metric it has (an embedding run's
    retrieval metrics; {} for a text run)."""
    return [store.last_values(run.job_id, FINAL_SERIES) for run in runs]


def config_diff(
    runs: list[RunRecord], finals: Optional[list[dict[str, float]]] = None
) -> tuple[list[str], list[list[str]]]:
    """(columns, rows) of a table with one column per run (``run_label``, job id beside a repeated
    name): the status, then only the settings whose values differ between the runs (a setting one
    run lacks counts as differing), then ``SUMMARY_ROWS``, then each ``FINAL_SERIES`` metric some
    run logged (``finals``: ``final_values``), its last value ("—" for a run without it). Every
    cell is text."""
    labels = [run_label(r) for r in runs]
    columns = ["setting"] + [
        f"{label} ({r.job_id})" if labels.count(label) > 1 else label for label, r in zip(labels, runs)
    ]
    rows: list[list[str]] = [["status", *(status_word(r) for r in runs)]]
    keys = sorted({key for r in runs for key in r.request})
    for key in keys:
        values = [r.request.get(key) for r in runs]
        if any(v != values[0] for v in values[1:]) or any(key not in r.request for r in runs):
            rows.append([key, *map(_shown, values)])
    summaries = [_summary(r) for r in runs]
    rows.extend([name, *(s[i] for s in summaries)] for i, name in enumerate(SUMMARY_ROWS))
    for name in FINAL_SERIES:
        if any(name in final for final in finals or []):
            rows.append([name, *(_shown(round(f[name], 4) if name in f else None) for f in finals or [])])
    return columns, rows
