"""Run history in one SQLite file (stdlib ``sqlite3``, WAL mode): every run and every logged step.

Written by the job thread as events arrive; each write is its own transaction, so a crash mid-run
leaves every step committed before it. Secrets never reach it: runs store ``public_dict()``.
Columns added after the first release (``ADDED_COLUMNS``) are added to an older database when it
is opened, so old files keep working (their old runs read None there). A finished run's loss series
is also kept packed in table ``series`` for comparisons (``series_store``). The run models live in
``records``, the label and filter checks in ``labels``; both are importable from here as before.
The list queries (a page of runs and its total, the pickers' labels) and the indexes they use are
``listing``'s.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional

from trainer_core.runs import listing, series_store
from trainer_core.runs.integrity import check_readable
from trainer_core.runs.labels import NAME_MAX_CHARS, NOTE_MAX_CHARS, STATUS_WORDS, label_text, status_word
from trainer_core.runs.records import RunDetail, RunRecord
from trainer_core.runs.series_store import LossRow, PackedSeries
from trainer_core.status import TrainingProgress
from trainer_core.vocabulary import LIVE_PHASES, EndReason, Phase

log = logging.getLogger(__name__)
__all__ = ["NAME_MAX_CHARS", "NOTE_MAX_CHARS", "STATUS_WORDS", "RunDetail", "RunRecord", "RunStore", "status_word"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    job_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    finished_at REAL,
    phase TEXT NOT NULL,
    request_json TEXT NOT NULL,
    output_dir TEXT NOT NULL,
    last_checkpoint TEXT,
    final_loss REAL,
    total_steps INTEGER,
    last_step INTEGER NOT NULL DEFAULT 0,
    error TEXT
);
CREATE TABLE IF NOT EXISTS metrics (
    job_id TEXT NOT NULL REFERENCES runs(job_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    step INTEGER NOT NULL,
    progress_json TEXT NOT NULL,
    PRIMARY KEY (job_id, seq)
);
"""
# runs columns newer than SCHEMA: name -> SQL type; added by ALTER TABLE where a database lacks them
ADDED_COLUMNS = {
    "training_seconds": "REAL",
    "tokens_per_second": "REAL",
    "end_reason": "TEXT",
    "best_checkpoint": "TEXT",
    "best_eval_loss": "REAL",
    "name": "TEXT",
    "note": "TEXT",
}
# metrics columns newer than SCHEMA: the values comparisons read, beside the event's JSON (``lean`` = 1
# where they are filled; older rows are read from the JSON instead)
ADDED_METRIC_COLUMNS = {"loss": "REAL", "eval_loss": "REAL", "num_tokens": "INTEGER", "lean": "INTEGER"}


class RunStore:
    """Thread-safe access to the history database at ``path`` (created on first use). Raises
    ``integrity.HistoryUnreadable`` (naming the file and the recovery; the file left untouched)
    when an existing file is not a readable SQLite database."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a new history (no file, or an empty one a failed write left): the caller may re-import run folders
        self.created = not self.path.exists() or (self.path.is_file() and self.path.stat().st_size == 0)
        check_readable(self.path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA + series_store.SCHEMA)
        self._add_missing_columns()
        self._db.executescript(listing.INDEXES)  # some index columns are in ADDED_COLUMNS

    def _add_missing_columns(self) -> None:
        """ALTER TABLE an older database up to ``ADDED_COLUMNS`` and ``ADDED_METRIC_COLUMNS``
        (another process may race us)."""
        for table, added in (("runs", ADDED_COLUMNS), ("metrics", ADDED_METRIC_COLUMNS)):
            present = {row["name"] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for name, sql_type in added.items():
                if name in present:
                    continue
                try:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):
                        raise

    def _write(self, sql: str, args: tuple = ()) -> int:
        with self._lock, self._db:
            return self._db.execute(sql, args).rowcount

    def _read(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # ----- writes (the job thread) -----
    def create_run(
        self, job_id: str, request: dict[str, Any], output_dir: str, phase: str, created_at: Optional[float] = None
    ) -> float:
        """Record a new run (``request`` must already be free of secrets); returns its ``created_at``
        (Unix s; now unless given, as a re-imported run gives its start)."""
        created_at = time.time() if created_at is None else created_at
        self._write(
            "INSERT INTO runs (job_id, created_at, phase, request_json, output_dir) VALUES (?, ?, ?, ?, ?)",
            (job_id, created_at, phase, json.dumps(request), output_dir),
        )
        return created_at

    def reopen_run(self, job_id: str, request: dict[str, Any], phase: str, from_step: int) -> None:
        """A resumed run is live again: drop its steps after ``from_step`` (they are redone), clear
        its end (finish time, error, ``end_reason``) and take its training summary (final loss,
        training seconds, tokens per second) from the last train step kept."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM metrics WHERE job_id = ? AND step > ?", (job_id, from_step))
            series_store.drop(self._db, job_id)  # live again: its packed series is stale
            last = _last_train(self._db, job_id)
            self._db.execute(
                "UPDATE runs SET phase = ?, finished_at = NULL, error = NULL, end_reason = NULL, request_json = ?, "
                "last_step = ?, final_loss = ?, training_seconds = ?, tokens_per_second = ? WHERE job_id = ?",
                (
                    phase,
                    json.dumps(request),
                    from_step,
                    None if last is None else last.loss,
                    None if last is None else last.elapsed_seconds,
                    _tokens_per_second(last),
                    job_id,
                ),
            )

    def set_phase(self, job_id: str, phase: str) -> None:
        """Record a phase change."""
        self._write("UPDATE runs SET phase = ? WHERE job_id = ?", (phase, job_id))

    def add_metric(self, progress: TrainingProgress) -> None:
        """Append one logged step and keep the run's summary columns current (a train event, one
        with a loss, sets ``training_seconds`` and ``tokens_per_second``)."""
        train = progress.loss is not None
        seconds = progress.elapsed_seconds if train else None
        rate = _tokens_per_second(progress) if train else None
        with self._lock, self._db:
            seq = self._db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM metrics WHERE job_id = ?", (progress.job_id,)
            ).fetchone()[0]
            self._db.execute(
                "INSERT INTO metrics (job_id, seq, step, progress_json, loss, eval_loss, num_tokens, lean) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                (
                    progress.job_id,
                    seq,
                    progress.step,
                    progress.model_dump_json(),
                    progress.loss,
                    progress.eval_loss,
                    progress.num_tokens,
                ),
            )
            self._db.execute(
                "UPDATE runs SET last_step = ?, total_steps = ?, final_loss = COALESCE(?, final_loss), "
                "training_seconds = COALESCE(?, training_seconds), "
                "tokens_per_second = CASE WHEN ? THEN ? ELSE tokens_per_second END WHERE job_id = ?",
                (progress.step, progress.total_steps, progress.loss, seconds, train, rate, progress.job_id),
            )
            series_store.drop(self._db, progress.job_id)  # a metric after the finish: repack on the next read

    def finish_run(
        self,
        job_id: str,
        phase: str,
        error: Optional[str],
        last_checkpoint: Optional[str],
        end_reason: Optional[str] = None,
        best_checkpoint: Optional[str] = None,
        best_eval_loss: Optional[float] = None,
        finished_at: Optional[float] = None,
    ) -> None:
        """Record the final phase (at ``finished_at``, Unix s; now unless given), the error text, the newest checkpoint folder, why the run ended
        (an ``EndReason`` value; None: unknown) and, when known, the best checkpoint and eval loss
        (None keeps the stored value). Then packs the run's loss series for comparisons
        (``series_store``); a pack that fails is logged and left to the first read, never undoing the finish."""
        with self._lock:
            with self._db:
                found = self._db.execute(
                    "UPDATE runs SET phase = ?, finished_at = ?, error = ?, end_reason = ?, "
                    "last_checkpoint = COALESCE(?, last_checkpoint), best_checkpoint = COALESCE(?, best_checkpoint), "
                    "best_eval_loss = COALESCE(?, best_eval_loss) WHERE job_id = ?",
                    (
                        phase,
                        finished_at or time.time(),
                        error,
                        end_reason,
                        last_checkpoint,
                        best_checkpoint,
                        best_eval_loss,
                        job_id,
                    ),
                ).rowcount
            try:
                with self._db:
                    if found:
                        series_store.pack_run(self._db, job_id)
            except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
                log.warning("could not pack the loss series of run %s: %s", job_id, exc)

    def mark_interrupted(self) -> list[RunRecord]:
        """Runs left live by a process that died become ``interrupted``; returns them."""
        marks = ",".join("?" * len(LIVE_PHASES))
        live = self._read(f"SELECT * FROM runs WHERE phase IN ({marks})", tuple(p.value for p in LIVE_PHASES))
        for row in live:
            self.finish_run(
                row["job_id"],
                Phase.interrupted.value,
                "the app stopped while this run was live",
                None,
                EndReason.interrupted.value,
            )
        return [_record(row) for row in live]

    def set_checkpoint(self, job_id: str, checkpoint: Optional[str]) -> None:
        """Record the run's newest resumable checkpoint folder."""
        self._write("UPDATE runs SET last_checkpoint = ? WHERE job_id = ?", (checkpoint, job_id))

    def set_label(self, job_id: str, name: Optional[str] = None, note: Optional[str] = None) -> bool:
        """Set the run's name and / or note (None leaves one as it is; "" or blanks clear it; text is
        stripped). Returns False for an unknown run. Raises ``ValueError`` naming the field when a
        text is longer than ``NAME_MAX_CHARS`` / ``NOTE_MAX_CHARS`` or the name holds a line break or
        another control character (a note may hold line breaks and tabs)."""
        sets, args = [], []
        for field, text, limit in (("name", name, NAME_MAX_CHARS), ("note", note, NOTE_MAX_CHARS)):
            if text is None:
                continue
            sets.append(f"{field} = ?")
            args.append(label_text(field, text, limit))
        if not sets:
            return bool(self._read("SELECT 1 FROM runs WHERE job_id = ?", (job_id,)))
        return self._write(f"UPDATE runs SET {', '.join(sets)} WHERE job_id = ?", (*args, job_id)) > 0

    def delete_run(self, job_id: str) -> bool:
        """Forget a run and its metrics (its files are the caller's business)."""
        return self._write("DELETE FROM runs WHERE job_id = ?", (job_id,)) > 0

    # ----- reads -----
    def list_runs(
        self,
        limit: int = 200,
        name: Optional[str] = None,
        status: Optional[str] = None,
        dataset: Optional[str] = None,
        offset: int = 0,
    ) -> list[RunRecord]:
        """Newest first, at most ``limit`` from the ``offset``-th on, keeping only runs that match
        every filter given: ``name`` is contained in the run's name or job id, ``status`` equals its
        ``status_word``, ``dataset`` is contained in one of its dataset paths or its Hub dataset id
        (text filters ignore case; None or "" is no filter). ``runs_page`` adds the total."""
        return self.runs_page(limit, offset, name, status, dataset)[0]

    def runs_page(
        self,
        limit: int = 200,
        offset: int = 0,
        name: Optional[str] = None,
        status: Optional[str] = None,
        dataset: Optional[str] = None,
    ) -> tuple[list[RunRecord], int]:
        """(the page ``list_runs`` gives, how many runs match the filters in all); only the page's
        runs are read in full (``listing.page``). ``ValueError`` for a negative limit or offset."""
        with self._lock:
            rows, total = listing.page(self._db, limit, offset, name, status, dataset)
        return [_record(row) for row in rows], total

    def run_labels(self, limit: int = 200) -> list[tuple[str, Optional[str]]]:
        """(job id, name or None) of the newest ``limit`` runs, newest first, without their settings."""
        with self._lock:
            return listing.labels(self._db, limit)

    def run_folders(self, claimed: tuple[str, ...] = ()) -> list[tuple]:
        """(job id, output folder, then each setting named in ``claimed``: its value or None) of
        every run, without reading the rest of its settings (``listing.folders``)."""
        with self._lock:
            return listing.folders(self._db, claimed)

    def loss_rows(self, job_id: str) -> list[LossRow]:
        """The run's logged events as (step, loss, eval_loss, num_tokens) in logged order, from the
        plain columns (older rows: from their JSON); no pydantic model per event
        (``series_store.loss_rows``). Empty for an unknown run."""
        with self._lock:
            return series_store.loss_rows(self._db, job_id)

    def packed_series(self, job_id: str) -> Optional[PackedSeries]:
        """A finished run's events as numpy arrays (``series_store.PackedSeries``, the same values as
        ``loss_rows``), from its pack (built and kept on the first read where missing); None for a
        live or unknown run (read ``loss_rows`` then)."""
        with self._lock, self._db:
            return series_store.packed(self._db, job_id)

    def last_values(self, job_id: str, names: tuple[str, ...]) -> dict[str, float]:
        """name -> the newest logged value of each of ``names`` (``TrainingProgress`` fields, e.g.
        ``eval_ndcg_at_10``) in run ``job_id``'s events; a name never logged (or an unknown run) is
        left out. Raises ValueError for a name that is no such field."""
        unknown = [name for name in names if name not in TrainingProgress.model_fields]
        if unknown:
            raise ValueError(f"not a logged metric: {', '.join(unknown)}")
        found = {}
        for name in names:
            rows = self._read(
                "SELECT json_extract(progress_json, ?) AS value FROM metrics WHERE job_id = ? "
                "AND json_extract(progress_json, ?) IS NOT NULL ORDER BY seq DESC LIMIT 1",
                (f"$.{name}", job_id, f"$.{name}"),
            )
            if rows:
                found[name] = float(rows[0]["value"])
        return found

    def changes(self) -> tuple[int, int]:
        """A key that moves whenever the history may have changed: (rows this connection has
        written, SQLite's ``data_version``, which moves when another connection commits to the file)."""
        with self._lock:
            return self._db.total_changes, self._db.execute("PRAGMA data_version").fetchone()[0]

    def get_record(self, job_id: str) -> Optional[RunRecord]:
        """One run without its metrics, or None."""
        rows = self._read("SELECT * FROM runs WHERE job_id = ?", (job_id,))
        return _record(rows[0]) if rows else None

    def get_run(self, job_id: str) -> Optional[RunDetail]:
        """One run with its metrics, or None."""
        rows = self._read("SELECT * FROM runs WHERE job_id = ?", (job_id,))
        if not rows:
            return None
        metrics = self._read("SELECT progress_json FROM metrics WHERE job_id = ? ORDER BY seq", (job_id,))
        return RunDetail(
            **_record(rows[0]).model_dump(), metrics=[TrainingProgress.model_validate_json(m[0]) for m in metrics]
        )

    def find_by_output_dir(self, output_dir: str) -> Optional[RunRecord]:
        """The run that writes into ``output_dir`` (resolved path), if any."""
        rows = self._read("SELECT * FROM runs WHERE output_dir = ? ORDER BY created_at DESC LIMIT 1", (output_dir,))
        return _record(rows[0]) if rows else None

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def _tokens_per_second(progress: Optional[TrainingProgress]) -> Optional[float]:
    """Input tokens per training second over the run so far; None without a token count or time."""
    if progress is None or not progress.num_tokens or progress.elapsed_seconds <= 0:
        return None
    return progress.num_tokens / progress.elapsed_seconds


def _last_train(db: sqlite3.Connection, job_id: str) -> Optional[TrainingProgress]:
    """The run's newest stored event with a training loss, or None."""
    for row in db.execute("SELECT progress_json FROM metrics WHERE job_id = ? ORDER BY seq DESC", (job_id,)):
        progress = TrainingProgress.model_validate_json(row[0])
        if progress.loss is not None:
            return progress
    return None


def _record(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    data["request"] = json.loads(data.pop("request_json"))
    return RunRecord(**data)
