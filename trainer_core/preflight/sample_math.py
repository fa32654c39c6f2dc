"""Totals of a whole file estimated from a ``data.row_sample`` sample, with their error.

A sample of one file has two strata: its first ``first`` rows (each stands for itself) and a
simple random sample of ``n`` of the other ``N`` rows (each stands for ``N / n`` rows). A total is
the stratified (Horvitz-Thompson) sum; its error is the 95 % half-width ``Z95 x`` the standard error
of the random stratum, ``N x sqrt((1 - n/N) x s^2 / n)`` (``s^2``: that stratum's sample variance),
which is zero when the sample holds every row. (Cochran, *Sampling Techniques*, 3rd ed., 5.3.)
"""

from __future__ import annotations

import math

import numpy as np

Z95 = 1.96  # the normal quantile of a two-sided 95 % interval


def row_weights(rows: int, first: int, total: int) -> np.ndarray:
    """How many file rows each of the ``rows`` sampled rows stands for, (rows,): 1 for the first
    ``first``, ``(total - first) / (rows - first)`` for the random ones."""
    weights = np.ones(rows, dtype=np.float64)
    if rows > first:
        weights[first:] = (total - first) / (rows - first)
    return weights


def repeats(weights: np.ndarray) -> np.ndarray:
    """Whole copies of each row, (rows,), summing to ``round(weights.sum())``: the rounded running
    total's steps, so no row's share is lost to rounding."""
    running = np.round(np.cumsum(weights)).astype(np.int64)
    return np.diff(running, prepend=0)


def total_margin(values: np.ndarray, first: int, total: int) -> float:
    """The 95 % half-width of the estimated file total of ``values`` (one per sampled row, the
    first ``first`` the file's first rows; ``total`` rows in the file)."""
    random = np.asarray(values[first:], dtype=np.float64)
    n, rest = len(random), total - first
    if n < 2 or n >= rest:
        return 0.0
    return float(Z95 * rest * math.sqrt((1 - n / rest) * random.var(ddof=1) / n))


def margins(columns: dict[str, list[tuple[np.ndarray, int, int]]]) -> dict[str, float]:
    """Each name's half-width over several files (independent samples: the variances add);
    ``columns[name]``: per file (values, first, total)."""
    return {
        name: math.sqrt(sum(total_margin(values, first, total) ** 2 for values, first, total in parts))
        for name, parts in columns.items()
    }


__all__ = ["Z95", "margins", "repeats", "row_weights", "total_margin"]
