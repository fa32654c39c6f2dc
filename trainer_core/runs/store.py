"""Run history in one SQLite file (stdlib ``sqlite3``, WAL mode): every run and every logged step.

Written by the job thread as events arrive; each write is its own transaction, so a crash mid-run
leaves every step committed before it. Secrets never reach it: runs store ``public_dict()``.
Columns added after the first release (``ADDED_COLUMNS``) are added to an older database when it
is opened, so old files keep working (their old runs read None there).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, Field, computed_field

from trainer_core.schemas import LIVE_PHASES, EndReason, Phase, TrainingProgress

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
ADDED_COLUMNS = {"training_seconds": "REAL", "tokens_per_second": "REAL", "end_reason": "TEXT",
                 "best_checkpoint": "TEXT", "best_eval_loss": "REAL", "name": "TEXT", "note": "TEXT"}
# metrics columns newer than SCHEMA: the values comparisons read, beside the event's JSON (``lean`` = 1
# where they are filled; older rows are read from the JSON instead)
ADDED_METRIC_COLUMNS = {"loss": "REAL", "eval_loss": "REAL", "num_tokens": "INTEGER", "lean": "INTEGER"}
NAME_MAX_CHARS = 80  # a run's editable name
NOTE_MAX_CHARS = 2000  # a run's editable note
# words a run's status can be filtered by (``status_word``): its phase, or why it ended where that says more
STATUS_WORDS = tuple(p.value for p in Phase if p is not Phase.idle) + ("cancelled", "early_stopped")


class RunRecord(BaseModel):
    """One run as stored. Times are Unix seconds (``created_at``, ``finished_at``) or seconds.

    ``training_seconds``: the last train event's ``elapsed_seconds`` (training time, continued over
    resumes; None before the first step). ``tokens_per_second``: input tokens per training second
    over the whole run, ``num_tokens / elapsed_seconds`` of that event (None when the trainer did
    not count tokens). ``end_reason``: see ``EndReason`` (None while live, and for runs recorded by
    versions before it existed). ``best_eval_loss``: the lowest logged eval loss (nats per token;
    None without evaluation). ``best_checkpoint``: the checkpoint folder of the best eval loss, kept
    and loaded as the final weights when early stopping was on (None otherwise). ``wall_seconds``
    (also as ``duration_seconds``) is clock time from creation to finish, idle time between a Stop
    and a Resume included. ``name`` and ``note``: the user's label for the run (None until set;
    at most ``NAME_MAX_CHARS`` / ``NOTE_MAX_CHARS`` characters; plain text, never markup)."""

    job_id: str
    created_at: float
    finished_at: Optional[float] = None
    phase: Phase
    request: dict[str, Any]
    output_dir: str
    last_checkpoint: Optional[str] = None
    final_loss: Optional[float] = None
    total_steps: Optional[int] = None
    last_step: int = 0
    error: Optional[str] = None
    training_seconds: Optional[float] = None
    tokens_per_second: Optional[float] = None
    end_reason: Optional[EndReason] = None
    best_checkpoint: Optional[str] = None
    best_eval_loss: Optional[float] = None
    name: Optional[str] = None
    note: Optional[str] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def wall_seconds(self) -> Optional[float]:
        """Wall time from creation to finish in seconds, resumes' idle gaps included (None while live)."""
        return None if self.finished_at is None else self.finished_at - self.created_at

    @property
    def duration_seconds(self) -> Optional[float]:
        """Alias of ``wall_seconds`` (the older name)."""
        return self.wall_seconds


class RunDetail(RunRecord):
    """A run with its per-step metrics (train and eval events, in logged order)."""

    metrics: list[TrainingProgress] = Field(default_factory=list)


class RunStore:
    """Thread-safe access to the history database at ``path`` (created on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)
        self._add_missing_columns()

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
    def create_run(self, job_id: str, request: dict[str, Any], output_dir: str, phase: str) -> float:
        """Record a new run (``request`` must already be free of secrets); returns its ``created_at``
        (Unix s)."""
        created_at = time.time()
        self._write("INSERT INTO runs (job_id, created_at, phase, request_json, output_dir) VALUES (?, ?, ?, ?, ?)",
                    (job_id, created_at, phase, json.dumps(request), output_dir))
        return created_at

    def reopen_run(self, job_id: str, request: dict[str, Any], phase: str, from_step: int) -> None:
        """A resumed run is live again: drop its steps after ``from_step`` (they are redone), clear
        its end (finish time, error, ``end_reason``) and take its training summary (final loss,
        training seconds, tokens per second) from the last train step kept."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM metrics WHERE job_id = ? AND step > ?", (job_id, from_step))
            last = _last_train(self._db, job_id)
            self._db.execute(
                "UPDATE runs SET phase = ?, finished_at = NULL, error = NULL, end_reason = NULL, request_json = ?, "
                "last_step = ?, final_loss = ?, training_seconds = ?, tokens_per_second = ? WHERE job_id = ?",
                (phase, json.dumps(request), from_step, None if last is None else last.loss,
                 None if last is None else last.elapsed_seconds, _tokens_per_second(last), job_id))

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
            seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM metrics WHERE job_id = ?",
                                   (progress.job_id,)).fetchone()[0]
            self._db.execute("INSERT INTO metrics (job_id, seq, step, progress_json, loss, eval_loss, num_tokens, lean) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                             (progress.job_id, seq, progress.step, progress.model_dump_json(), progress.loss,
                              progress.eval_loss, progress.num_tokens))
            self._db.execute("UPDATE runs SET last_step = ?, total_steps = ?, final_loss = COALESCE(?, final_loss), "
                             "training_seconds = COALESCE(?, training_seconds), "
                             "tokens_per_second = CASE WHEN ? THEN ? ELSE tokens_per_second END WHERE job_id = ?",
                             (progress.step, progress.total_steps, progress.loss, seconds, train, rate, progress.job_id))

    def finish_run(self, job_id: str, phase: str, error: Optional[str], last_checkpoint: Optional[str],
                   end_reason: Optional[str] = None, best_checkpoint: Optional[str] = None,
                   best_eval_loss: Optional[float] = None) -> None:
        """Record the final phase, the error text, the newest checkpoint folder, why the run ended
        (an ``EndReason`` value; None: unknown) and, when known, the best checkpoint and eval loss
        (None keeps the stored value)."""
        self._write("UPDATE runs SET phase = ?, finished_at = ?, error = ?, end_reason = ?, "
                    "last_checkpoint = COALESCE(?, last_checkpoint), best_checkpoint = COALESCE(?, best_checkpoint), "
                    "best_eval_loss = COALESCE(?, best_eval_loss) WHERE job_id = ?",
                    (phase, time.time(), error, end_reason, last_checkpoint, best_checkpoint, best_eval_loss, job_id))

    def mark_interrupted(self) -> list[RunRecord]:
        """Runs left live by a process that died become ``interrupted``; returns them."""
        marks = ",".join("?" * len(LIVE_PHASES))
        live = self._read(f"SELECT * FROM runs WHERE phase IN ({marks})", tuple(p.value for p in LIVE_PHASES))
        for row in live:
            self.finish_run(row["job_id"], Phase.interrupted.value, "the app stopped while this run was live", None,
                            EndReason.interrupted.value)
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
            args.append(_label_text(field, text, limit))
        if not sets:
            return bool(self._read("SELECT 1 FROM runs WHERE job_id = ?", (job_id,)))
        return self._write(f"UPDATE runs SET {', '.join(sets)} WHERE job_id = ?", (*args, job_id)) > 0

    def delete_run(self, job_id: str) -> bool:
        """Forget a run and its metrics (its files are the caller's business)."""
        return self._write("DELETE FROM runs WHERE job_id = ?", (job_id,)) > 0

    # ----- reads -----
    def list_runs(self, limit: int = 200, name: Optional[str] = None, status: Optional[str] = None,
                  dataset: Optional[str] = None) -> list[RunRecord]:
        """Newest first, at most ``limit``, keeping only runs that match every filter given:
        ``name`` is contained in the run's name or job id, ``status`` equals its ``status_word``,
        ``dataset`` is contained in one of its dataset paths or its Hub dataset id (text filters
        ignore case; None or "" is no filter)."""
        if not (name or status or dataset):
            return [_record(r) for r in self._read("SELECT * FROM runs ORDER BY created_at DESC LIMIT ?", (limit,))]
        found = []
        for row in self._read("SELECT * FROM runs ORDER BY created_at DESC"):
            run = _record(row)
            if _matches(run, name, status, dataset):
                found.append(run)
                if len(found) >= limit:
                    break
        return found

    def loss_rows(self, job_id: str) -> list[tuple[int, Optional[float], Optional[float], Optional[int]]]:
        """The run's logged events as (step, loss, eval_loss, num_tokens) in logged order, from the
        plain columns (rows written before they existed: decoded from the JSON by SQLite's
        ``json_extract``); no pydantic model per event (``bench/compare.py`` times both). Empty for
        an unknown run."""
        values = ", ".join(f"CASE WHEN lean THEN {key} ELSE json_extract(progress_json, '$.{key}') END"
                           for key in ("loss", "eval_loss", "num_tokens"))
        with self._lock:
            cursor = self._db.cursor()
            cursor.row_factory = None  # plain tuples: no Row object per event
            return cursor.execute(f"SELECT step, {values} FROM metrics WHERE job_id = ? ORDER BY seq", (job_id,)).fetchall()

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
        return RunDetail(**_record(rows[0]).model_dump(),
                         metrics=[TrainingProgress.model_validate_json(m[0]) for m in metrics])

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


def status_word(run: RunRecord) -> str:
    """The run's state in one of ``STATUS_WORDS``: its phase, except ``cancelled`` for a stopped
    run that was cancelled (nothing saved) and ``early_stopped`` for one ended by early stopping."""
    if run.phase is Phase.stopped and run.end_reason is EndReason.cancelled:
        return "cancelled"
    if run.end_reason is EndReason.early_stopped:
        return "early_stopped"
    return run.phase.value


def _matches(run: RunRecord, name: Optional[str], status: Optional[str], dataset: Optional[str]) -> bool:
    """Whether ``run`` passes the filters of ``RunStore.list_runs``."""
    if name and name.casefold() not in f"{run.name or ''}\n{run.job_id}".casefold():
        return False
    if status and status_word(run) != status:
        return False
    if dataset:
        sources = [*(run.request.get("local_datasets") or []), run.request.get("hf_dataset") or ""]
        return any(dataset.casefold() in str(s).casefold() for s in sources)
    return True


def _label_text(field: str, text: str, limit: int) -> Optional[str]:
    """``text`` stripped (None when blank); ``ValueError`` when too long or holding control characters."""
    text = text.strip()
    if len(text) > limit:
        raise ValueError(f"{field} is {len(text)} characters long; at most {limit} are allowed")
    allowed = "" if field == "name" else "\n\t"
    if any(ord(c) < 32 and c not in allowed or ord(c) == 127 for c in text):
        raise ValueError(f"{field} holds a control character" + ("" if allowed else " (a line break?): keep it to one line"))
    return text or None


def _record(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    data["request"] = json.loads(data.pop("request_json"))
    return RunRecord(**data)
