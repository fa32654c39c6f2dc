"""The job queue in the run history's SQLite file (table ``queue``), so it survives an app restart.

An entry is a checked start request (``public_dict()``: no secrets) with a position. Its state
moves ``waiting`` -> ``starting`` -> (row deleted: the job is now a run in the history), or to
``refused`` (the checks at start said no; kept, with the reason, until the user removes it), or
from ``starting`` to ``interrupted`` when the app died while handing it over (never rerun on its
own). Positions are 1, 2, ... over the waiting entries, renumbered on every change.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, computed_field

from trainer_core.refusals import Refusal

SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    queue_id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    created_at REAL NOT NULL,
    state TEXT NOT NULL,
    request_json TEXT NOT NULL,
    had_token INTEGER NOT NULL DEFAULT 0,
    error TEXT
);
"""
MAX_ENTRIES = 100  # a queue longer than this is refused (each entry is a whole training run)


class QueueState(str, Enum):
    """Where a queued job is; ``waiting`` entries run in ``position`` order."""

    waiting = "waiting"
    starting = "starting"
    refused = "refused"
    interrupted = "interrupted"


class QueueEntry(BaseModel):
    """One queued job. ``position``: 1-based place among the waiting entries (0 for the others).
    ``created_at``: Unix seconds. ``request``: the checked request without secrets. ``had_token``:
    a Hugging Face token came with it (kept in memory only, so lost at a restart). ``error``: why
    it was refused or interrupted."""

    queue_id: str
    position: int
    created_at: float
    state: QueueState
    request: dict[str, Any]
    had_token: bool = False
    error: Optional[str] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> str:
        """The request in one line: model, data files, method, length of the run and learning
        rate, e.g. ``SmolLM2-135M-Instruct · identity.json · lora r16 · 3.0 epochs · lr 0.001``."""
        request = self.request
        model = str(request.get("model_name", "")).rstrip("/").rsplit("/", 1)[-1]
        data = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in request.get("local_datasets") or []]
        if request.get("hf_dataset"):
            data.append(str(request["hf_dataset"]))
        method = str(request.get("training_type", "lora"))
        if method != "full":
            method += f" r{request.get('lora_r')}"
        if request.get("training_method", "sft") != "sft":
            method = f"{request['training_method']} · {method}"
        steps = request.get("max_steps")
        length = f"{steps} step{'s' * (steps != 1)}" if steps else f"{request.get('num_epochs')} epochs"
        return " · ".join([model, ", ".join(data) or "-", method, length, f"lr {request.get('learning_rate')}"])


class QueueFull(Refusal):
    """The queue already holds ``MAX_ENTRIES`` entries."""

    code, status = "queue_full", 409


def new_queue_id() -> str:
    """``q_<unix time>_<8 hex>``: sortable and not guessable."""
    return f"q_{int(time.time())}_{secrets.token_hex(4)}"


class QueueStore:
    """Thread-safe access to the ``queue`` table of the history database at ``path``."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(Path(path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def add(self, request: dict[str, Any], had_token: bool) -> QueueEntry:
        """Append a waiting entry for ``request`` (already free of secrets). Raises QueueFull."""
        queue_id = new_queue_id()
        with self._lock, self._db:
            if self._db.execute("SELECT COUNT(*) FROM queue").fetchone()[0] >= MAX_ENTRIES:
                raise QueueFull(f"the queue already holds {MAX_ENTRIES} jobs: remove some before adding more")
            last = self._db.execute(
                "SELECT COALESCE(MAX(position), 0) FROM queue WHERE state = ?", (QueueState.waiting.value,)
            ).fetchone()[0]
            self._db.execute(
                "INSERT INTO queue (queue_id, position, created_at, state, request_json, had_token) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (queue_id, last + 1, time.time(), QueueState.waiting.value, json.dumps(request), int(had_token)),
            )
        entry = self.get(queue_id)
        assert entry is not None
        return entry

    def get(self, queue_id: str) -> Optional[QueueEntry]:
        """The entry, or None."""
        with self._lock:
            row = self._db.execute("SELECT * FROM queue WHERE queue_id = ?", (queue_id,)).fetchone()
        return None if row is None else _entry(row)

    def entries(self) -> list[QueueEntry]:
        """Waiting entries in run order, then the refused / interrupted / starting ones, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM queue ORDER BY state != ?, position, created_at", (QueueState.waiting.value,)
            ).fetchall()
        return [_entry(row) for row in rows]

    def next_waiting(self) -> Optional[QueueEntry]:
        """The waiting entry at position 1, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM queue WHERE state = ? ORDER BY position LIMIT 1", (QueueState.waiting.value,)
            ).fetchone()
        return None if row is None else _entry(row)

    def claim(self, queue_id: str) -> bool:
        """``waiting`` -> ``starting`` for one entry, atomically: False when it was not waiting (another
        dispatcher, or a Remove, got there first)."""
        with self._lock, self._db:
            claimed = (
                self._db.execute(
                    "UPDATE queue SET state = ?, position = 0 WHERE queue_id = ? AND state = ?",
                    (QueueState.starting.value, queue_id, QueueState.waiting.value),
                ).rowcount
                > 0
            )
            self._renumber()
        return claimed

    def pending(self) -> bool:
        """Whether a job is waiting or being started (the monitor keeps following meanwhile)."""
        with self._lock:
            return (
                self._db.execute(
                    "SELECT 1 FROM queue WHERE state IN (?, ?) LIMIT 1",
                    (QueueState.waiting.value, QueueState.starting.value),
                ).fetchone()
                is not None
            )

    def set_state(self, queue_id: str, state: QueueState, error: Optional[str] = None) -> None:
        """Move an entry to ``state`` (back to ``waiting``: it keeps the front place); positions renumbered."""
        with self._lock, self._db:
            position = 0 if state != QueueState.waiting else -1  # -1 sorts first, then renumbered to 1
            self._db.execute(
                "UPDATE queue SET state = ?, error = ?, position = ? WHERE queue_id = ?",
                (state.value, error, position, queue_id),
            )
            self._renumber()

    def remove(self, queue_id: str, unless: Optional[QueueState] = None) -> bool:
        """Delete an entry, in one statement (a dispatcher cannot claim it in between), unless it is
        in state ``unless``; False when there is none (or it was in that state)."""
        with self._lock, self._db:
            gone = (
                self._db.execute(
                    "DELETE FROM queue WHERE queue_id = ? AND state != ?", (queue_id, unless.value if unless else "")
                ).rowcount
                > 0
            )
            self._renumber()
        return gone

    def move(self, queue_id: str, position: int) -> Optional[QueueEntry]:
        """Put a waiting entry at ``position`` (1-based, clamped to the waiting entries); None when
        there is no waiting entry with that id."""
        with self._lock, self._db:
            ids = [
                r[0]
                for r in self._db.execute(
                    "SELECT queue_id FROM queue WHERE state = ? ORDER BY position", (QueueState.waiting.value,)
                )
            ]
            if queue_id not in ids:
                return None
            ids.remove(queue_id)
            ids.insert(max(0, min(position - 1, len(ids))), queue_id)
            for place, entry_id in enumerate(ids, start=1):
                self._db.execute("UPDATE queue SET position = ? WHERE queue_id = ?", (place, entry_id))
        return self.get(queue_id)

    def recover(self) -> list[QueueEntry]:
        """At app start: entries left ``starting`` by a process that died become ``interrupted``
        (their run, if it began, is in the history as interrupted); returns them."""
        with self._lock, self._db:
            rows = self._db.execute("SELECT * FROM queue WHERE state = ?", (QueueState.starting.value,)).fetchall()
            self._db.execute(
                "UPDATE queue SET state = ?, position = 0, error = ? WHERE state = ?",
                (
                    QueueState.interrupted.value,
                    "the app stopped while this job was being started; "
                    "add it again, or resume its run from the Runs tab",
                    QueueState.starting.value,
                ),
            )
        return [_entry(row) for row in rows]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def _renumber(self) -> None:
        """Positions 1..n over the waiting entries in their current order; 0 for the others (lock held)."""
        ids = [
            r[0]
            for r in self._db.execute(
                "SELECT queue_id FROM queue WHERE state = ? ORDER BY position, created_at", (QueueState.waiting.value,)
            )
        ]
        for place, entry_id in enumerate(ids, start=1):
            self._db.execute("UPDATE queue SET position = ? WHERE queue_id = ?", (place, entry_id))
        self._db.execute("UPDATE queue SET position = 0 WHERE state != ?", (QueueState.waiting.value,))


def _entry(row: sqlite3.Row) -> QueueEntry:
    data = dict(row)
    data["request"] = json.loads(data.pop("request_json"))
    data["had_token"] = bool(data["had_token"])
    return QueueEntry(**data)
