"""A run's loss series as stored for comparisons: the lean per-event query over table ``metrics``
and, for a finished run, the same values packed once into one row of table ``series`` (numpy
arrays as ``tobytes()`` blobs, read back with ``np.frombuffer``).

Reading 10 runs of 10,000 events through Python's ``sqlite3`` builds 100,000 tuples (0.1-0.2 s);
the packed row is five blobs per run. A pack is written when the run finishes (``pack_run`` from
``RunStore.finish_run``), or on the first read of a run that finished before packs existed; it is
dropped when the run is reopened (resume) or gains a metric after finishing, and rebuilt on the
next read. Unpacked, a pack gives exactly the rows the lean query gives (``PackedSeries.rows``).
Functions here take the store's connection; the caller holds the store's lock.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Optional

import numpy as np

SCHEMA = """
CREATE TABLE IF NOT EXISTS series (
    job_id TEXT PRIMARY KEY REFERENCES runs(job_id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    n INTEGER NOT NULL,
    steps BLOB NOT NULL,
    loss BLOB NOT NULL,
    eval_loss BLOB NOT NULL,
    num_tokens BLOB NOT NULL,
    present BLOB NOT NULL
);
"""
VERSION = 1  # of the packed layout below; a row of another version is rebuilt on read
HAS_LOSS, HAS_EVAL_LOSS, HAS_TOKENS = 1, 2, 4  # bits of ``present``
LossRow = tuple[int, Optional[float], Optional[float], Optional[int]]  # (step, loss, eval_loss, num_tokens)
_VALUES = ", ".join(
    f"CASE WHEN lean THEN {key} ELSE json_extract(progress_json, '$.{key}') END"
    for key in ("loss", "eval_loss", "num_tokens")
)


@dataclass(frozen=True)
class PackedSeries:
    """A run's logged events as aligned arrays of shape (n,), in logged order: ``steps`` (int64),
    ``loss`` and ``eval_loss`` (float64, nats per token; NaN where the event has none),
    ``num_tokens`` (int64 input tokens seen; 0 where none) and ``present`` (uint8 bits
    ``HAS_LOSS | HAS_EVAL_LOSS | HAS_TOKENS``: which of the three the event has)."""

    steps: np.ndarray
    loss: np.ndarray
    eval_loss: np.ndarray
    num_tokens: np.ndarray
    present: np.ndarray

    def has(self, bit: int) -> np.ndarray:
        """Boolean mask (n,) of the events that have the value of ``bit`` (``HAS_LOSS``, ...)."""
        return (self.present & bit) != 0

    def rows(self) -> list[LossRow]:
        """The events as ``loss_rows`` gives them: (step, loss, eval_loss, num_tokens), None where absent."""
        flags = self.present.tolist()
        return [
            (
                step,
                loss if f & HAS_LOSS else None,
                ev if f & HAS_EVAL_LOSS else None,
                tokens if f & HAS_TOKENS else None,
            )
            for step, loss, ev, tokens, f in zip(
                self.steps.tolist(), self.loss.tolist(), self.eval_loss.tolist(), self.num_tokens.tolist(), flags
            )
        ]


def loss_rows(db: sqlite3.Connection, job_id: str) -> list[LossRow]:
    """Run ``job_id``'s events as (step, loss, eval_loss, num_tokens) tuples in logged order, from
    the plain metric columns (rows written before they existed: decoded from the event's JSON by
    SQLite's ``json_extract``). Empty for an unknown run."""
    cursor = db.cursor()
    cursor.row_factory = None  # plain tuples: no Row object per event
    return cursor.execute(f"SELECT step, {_VALUES} FROM metrics WHERE job_id = ? ORDER BY seq", (job_id,)).fetchall()


def pack(rows: list[LossRow]) -> PackedSeries:
    """``rows`` (as ``loss_rows`` gives them) as a ``PackedSeries``."""
    steps, losses, evals, tokens = zip(*rows) if rows else ((), (), (), ())
    present = (
        (np.fromiter((v is not None for v in losses), bool, len(rows)) * HAS_LOSS)
        | (np.fromiter((v is not None for v in evals), bool, len(rows)) * HAS_EVAL_LOSS)
        | (np.fromiter((v is not None for v in tokens), bool, len(rows)) * HAS_TOKENS)
    ).astype(np.uint8)
    return PackedSeries(
        np.array(steps, dtype=np.int64),
        np.array(losses, dtype=np.float64),  # None -> NaN
        np.array(evals, dtype=np.float64),
        np.array([0 if v is None else v for v in tokens], dtype=np.int64),
        present,
    )


def _unpacked(row: tuple) -> PackedSeries:
    """A ``series`` row (n, steps, loss, eval_loss, num_tokens, present) as arrays (read-only views)."""
    n, steps, loss, eval_loss, tokens, present = row
    series = PackedSeries(
        np.frombuffer(steps, np.int64),
        np.frombuffer(loss, np.float64),
        np.frombuffer(eval_loss, np.float64),
        np.frombuffer(tokens, np.int64),
        np.frombuffer(present, np.uint8),
    )
    if any(a.shape != (n,) for a in (series.steps, series.loss, series.eval_loss, series.num_tokens, series.present)):
        raise ValueError(f"packed series of {n} events has arrays of another length")
    return series


def pack_run(db: sqlite3.Connection, job_id: str) -> PackedSeries:
    """Pack run ``job_id``'s current events into its ``series`` row (replacing any) and return them."""
    series = pack(loss_rows(db, job_id))
    db.execute(
        "INSERT OR REPLACE INTO series (job_id, version, n, steps, loss, eval_loss, num_tokens, present) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            job_id,
            VERSION,
            len(series.steps),
            series.steps.tobytes(),
            series.loss.tobytes(),
            series.eval_loss.tobytes(),
            series.num_tokens.tobytes(),
            series.present.tobytes(),
        ),
    )
    return series


def drop(db: sqlite3.Connection, job_id: str) -> None:
    """Forget run ``job_id``'s pack (its events changed); the next ``packed`` read rebuilds it."""
    db.execute("DELETE FROM series WHERE job_id = ?", (job_id,))


def packed(db: sqlite3.Connection, job_id: str) -> Optional[PackedSeries]:
    """Finished run ``job_id``'s events from its pack, packing them first when it has none (a run
    that finished before packs existed, or changed since) or one of another ``VERSION``; None for a
    live (unfinished) or unknown run, whose events the caller reads with ``loss_rows``. Call inside
    a transaction, so a pack is never written for events that changed meanwhile."""
    cursor = db.cursor()
    cursor.row_factory = None
    found = cursor.execute(
        "SELECT r.finished_at, s.version, s.n, s.steps, s.loss, s.eval_loss, s.num_tokens, s.present "
        "FROM runs r LEFT JOIN series s ON s.job_id = r.job_id WHERE r.job_id = ?",
        (job_id,),
    ).fetchone()
    if found is None or found[0] is None:
        return None
    if found[1] == VERSION:
        return _unpacked(found[2:])
    return pack_run(db, job_id)
