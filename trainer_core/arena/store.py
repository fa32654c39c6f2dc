"""Arena battles in the run history database (``<data dir>``'s SQLite file, table ``arena_battles``):
each battle's prompt, both answers and the models behind them, and the vote once given."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Optional

SCHEMA = """
CREATE TABLE IF NOT EXISTS arena_battles (
    battle_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    left_model TEXT NOT NULL,
    right_model TEXT NOT NULL,
    record_json TEXT NOT NULL,
    vote TEXT,
    voted_at REAL
);
CREATE INDEX IF NOT EXISTS arena_battles_created ON arena_battles (created_at);
"""


class ArenaStore:
    """Thread-safe access to the ``arena_battles`` table of the database at ``path``."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)

    def add(self, battle_id: str, created_at: float, left: str, right: str, record: dict[str, Any]) -> None:
        """Store a new battle (no vote yet); ``record`` holds the prompt and both answers."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO arena_battles (battle_id, created_at, left_model, right_model, record_json) "
                "VALUES (?, ?, ?, ?, ?)",
                (battle_id, created_at, left, right, json.dumps(record)),
            )

    def vote(self, battle_id: str, vote: str, voted_at: float) -> bool:
        """Record ``vote`` on a battle that has none; False when the battle is unknown or voted already
        (a vote is never changed: a second click or a replayed request counts once)."""
        with self._lock, self._db:
            changed = self._db.execute(
                "UPDATE arena_battles SET vote = ?, voted_at = ? WHERE battle_id = ? AND vote IS NULL",
                (vote, voted_at, battle_id),
            ).rowcount
        return changed == 1

    def get(self, battle_id: str) -> Optional[dict[str, Any]]:
        """One battle as a dict (``battle_id``, ``created_at``, ``left_model``, ``right_model``,
        ``vote``, ``voted_at`` and the record's ``prompt`` / answers), or None."""
        with self._lock:
            row = self._db.execute("SELECT * FROM arena_battles WHERE battle_id = ?", (battle_id,)).fetchone()
        return _row(row) if row else None

    def list(self, limit: int = 200, voted_only: bool = False) -> list[dict[str, Any]]:
        """Newest first."""
        sql = "SELECT * FROM arena_battles" + (" WHERE vote IS NOT NULL" if voted_only else "")
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
        return [_row(row) for row in rows]

    def votes(self) -> list[tuple[str, str, str]]:
        """(left model, right model, vote) of every voted battle, oldest first (Elo's order)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT left_model, right_model, vote FROM arena_battles WHERE vote IS NOT NULL ORDER BY voted_at"
            ).fetchall()
        return [(r["left_model"], r["right_model"], r["vote"]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _row(row: sqlite3.Row) -> dict[str, Any]:
    out = {key: row[key] for key in row.keys() if key != "record_json"}
    out.update(json.loads(row["record_json"]))
    return out
