"""The run history's list queries: a page of runs, newest first, with the total that match the Runs
tab's filters, the lean (job id, name) list the pickers show, and every run's folders (a Start's
check that its folders are its own).

A history of 1,000 runs must list as fast as an empty one (``bench/history_scale.py``), so nothing
here reads every run in full: the order is the index ``runs_by_created`` (``INDEXES``), a page is
``LIMIT`` / ``OFFSET`` over it, and a filtered list first matches each run on a few plain columns
(name, job id, phase, end reason and, for the dataset filter only, the two dataset fields pulled
out of the settings' JSON by SQLite's ``json_extract``) with the very predicate of the unpaged list (``labels.matches``), then
reads in full only the runs of the page. Functions here take the store's connection; the caller
holds the store's lock.
"""

from __future__ import annotations

import json
import sqlite3
from types import SimpleNamespace
from typing import Optional

from trainer_core.runs.labels import matches
from trainer_core.vocabulary import EndReason, Phase

PAGE_SIZE = 50  # runs in a page: GET /api/train/runs' default limit, the Runs tab's first rows and each "Show more"
MAX_PAGE_SIZE = 10_000  # the largest page: GET /api/train/runs' largest limit, the Runs table's most rows

# indexes of the tables in ``store.SCHEMA``; CREATE ... IF NOT EXISTS adds them to an older file on open
# (after its missing columns). ``runs_by_created`` covers what the name and status filters read.
INDEXES = """
CREATE INDEX IF NOT EXISTS runs_by_created ON runs(created_at, job_id, name, phase, end_reason);
CREATE INDEX IF NOT EXISTS runs_by_output_dir ON runs(output_dir, created_at);
CREATE INDEX IF NOT EXISTS runs_by_phase ON runs(phase);
"""
NEWEST_FIRST = "ORDER BY created_at DESC, job_id DESC"  # ties broken by job id, so pages never overlap
_PLAIN = "job_id, name, phase, end_reason"  # what the name and status filters read
_DATASETS = "json_extract(request_json, '$.local_datasets', '$.hf_dataset')"  # and the dataset filter: one parse


def page(
    db: sqlite3.Connection,
    limit: int,
    offset: int = 0,
    name: Optional[str] = None,
    status: Optional[str] = None,
    dataset: Optional[str] = None,
) -> tuple[list[sqlite3.Row], int]:
    """(rows of ``runs``, newest first, from the ``offset``-th match on, at most ``limit``; how many
    runs match in all) under the filters of ``labels.matches`` (None or "": no filter).
    ``ValueError`` for a negative ``limit`` or ``offset``."""
    if limit < 0 or offset < 0:
        raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
    if not (name or status or dataset):
        total = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        rows = db.execute(f"SELECT * FROM runs {NEWEST_FIRST} LIMIT ? OFFSET ?", (limit, offset)).fetchall()
        return rows, total
    columns = f"{_PLAIN}, {_DATASETS}" if dataset else f"{_PLAIN}, NULL"
    found = [
        row[0]
        for row in db.execute(f"SELECT {columns} FROM runs {NEWEST_FIRST}")
        if matches(_lean(row), name, status, dataset)
    ]
    chosen = found[offset : offset + limit]
    if not chosen:
        return [], len(found)
    marks = ",".join("?" * len(chosen))
    rows = {row["job_id"]: row for row in db.execute(f"SELECT * FROM runs WHERE job_id IN ({marks})", chosen)}
    return [rows[job_id] for job_id in chosen if job_id in rows], len(found)


def labels(db: sqlite3.Connection, limit: int) -> list[tuple[str, Optional[str]]]:
    """(job id, name or None) of the newest ``limit`` runs, newest first: what a picker shows,
    without reading any run's settings."""
    cursor = db.cursor()
    cursor.row_factory = None
    return cursor.execute(f"SELECT job_id, name FROM runs {NEWEST_FIRST} LIMIT ?", (limit,)).fetchall()


def folders(db: sqlite3.Connection, claimed: tuple[str, ...]) -> list[tuple]:
    """(job id, output folder, then the value of each setting named in ``claimed``, None where unset)
    of every run, its other settings left unread (SQLite's ``json_extract``)."""
    cursor = db.cursor()
    cursor.row_factory = None
    values = "".join(", json_extract(request_json, ?)" for _ in claimed)
    return cursor.execute(f"SELECT job_id, output_dir{values} FROM runs", [f"$.{name}" for name in claimed]).fetchall()


def _lean(row: tuple) -> SimpleNamespace:
    """A row of ``_PLAIN`` and ``_DATASETS`` (JSON text ``[local_datasets, hf_dataset]``, or NULL when
    not read) as the few attributes ``labels.matches`` reads of a ``RunRecord``; a ``local_datasets``
    that is not a list counts as none."""
    job_id, name, phase, end_reason, datasets = row
    local, hub = json.loads(datasets) if datasets else (None, None)
    return SimpleNamespace(
        job_id=job_id,
        name=name,
        phase=Phase(phase),
        end_reason=EndReason(end_reason) if end_reason else None,
        request={"local_datasets": local if isinstance(local, list) else None, "hf_dataset": hub},
    )
