"""Tasks in the run history database (table ``tasks``, same SQLite file as ``runs.store``).

A task's record is written when it starts, on each progress event (at most every half second) and
when it ends; deleting a run deletes its tasks (foreign key, ``ON DELETE CASCADE``).
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Optional

from trainer_core.runs.store import SCHEMA as RUNS_SCHEMA
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    job_id TEXT REFERENCES runs(job_id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    record_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_job ON tasks(job_id, created_at);
"""


class TaskStore:
    """Thread-safe access to the ``tasks`` table of the database at ``path``."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(RUNS_SCHEMA + SCHEMA)  # the runs table first: tasks refer to it

    def save(self, record: TaskRecord) -> None:
        """Insert or replace ``record`` (its ``request`` must already be free of secrets)."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO tasks (task_id, job_id, kind, record_json, created_at) VALUES (?, ?, ?, ?, ?)",
                (record.task_id, record.job_id, record.kind.value, record.model_dump_json(), record.created_at),
            )

    def get(self, task_id: str) -> Optional[TaskRecord]:
        """One task, or None."""
        with self._lock:
            row = self._db.execute("SELECT record_json FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        return TaskRecord.model_validate_json(row[0]) if row else None

    def list(self, job_id: Optional[str] = None, kind: Optional[TaskKind] = None, limit: int = 200) -> list[TaskRecord]:
        """Newest first; only run ``job_id``'s and only ``kind`` when given."""
        sql, args = "SELECT record_json FROM tasks WHERE 1=1", []
        if job_id is not None:
            sql, args = sql + " AND job_id = ?", [*args, job_id]
        if kind is not None:
            sql, args = sql + " AND kind = ?", [*args, kind.value]
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created_at DESC LIMIT ?", (*args, limit)).fetchall()
        return [TaskRecord.model_validate_json(r[0]) for r in rows]

    def mark_interrupted(self) -> int:
        """Tasks left running by a process that died become ``failed`` (with a finish time), and
        what they had written is removed (their own folder, named by the task id); returns how many."""
        count = 0
        for record in self.list(limit=100_000):
            if record.phase == TaskPhase.running:
                error = "the app stopped while this task ran"
                if record.output_dir and Path(record.output_dir).name == record.task_id:
                    shutil.rmtree(record.output_dir, ignore_errors=True)
                self.save(
                    record.model_copy(
                        update={
                            "phase": TaskPhase.failed,
                            "error": error,
                            "message": f"Failed: {error}",
                            "finished_at": time.time(),
                        }
                    )
                )
                count += 1
        return count

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
