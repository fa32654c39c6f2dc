"""Is the run history readable? Checked before the studio opens ``studio.db`` for writing, so a
damaged file is named and left exactly as it was instead of ending start-up in a raw
``sqlite3.DatabaseError``.

The check opens the file read-only (SQLite URI ``mode=ro``: the database file is never written;
for a file in WAL mode SQLite may create its empty ``-wal`` / ``-shm`` companions), runs SQLite's
``PRAGMA quick_check`` (https://sqlite.org/pragma.html#pragma_quick_check: the integrity check
without the index-content comparison, O(N) in the file's size) and checks that a file with tables
is a studio history (``runs`` and ``metrics`` with the columns every version had), so another
program's database is refused, not altered. A database that another program holds locked is
reported as in use, not as damaged.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

RECOVERY_COMMAND = "finetune-studio-cli import-runs"
# tables the studio's stores create in studio.db, and the columns of each that every version had
STUDIO_TABLES = {"runs", "metrics", "series", "queue", "tasks", "share_links"}
REQUIRED_COLUMNS = {
    "runs": {"job_id", "created_at", "phase", "request_json", "output_dir"},
    "metrics": {"job_id", "seq", "step", "progress_json"},
}
BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED


class HistoryUnreadable(RuntimeError):
    """The run history database cannot be read. The message names the file, says it was left
    untouched, and how to recover (move it aside; the runs are re-imported from their run folders)."""

    def __init__(self, path: Path, reason: str, busy: bool = False) -> None:
        self.path = Path(path)
        self.reason = reason
        self.busy = busy
        aside = f"{self.path}.broken"
        if busy:
            super().__init__(
                f"The run history {self.path} is in use by another program ({reason}); nothing is wrong with "
                "it and it was left untouched. Close the other program (another studio or CLI run on the same "
                "data dir?) and start again."
            )
            return
        super().__init__(
            f"The run history {self.path} cannot be read ({reason}). It was left untouched. To recover: "
            f"stop the studio, move the file aside (mv {self.path} {aside}; also any {self.path.name}-wal and "
            f"{self.path.name}-shm beside it) and start again. The run folders are kept: the studio re-imports "
            f"the runs in them from their run.json and metrics.jsonl when it starts with a new history "
            f"(or run `{RECOVERY_COMMAND}`). Their queue and task records are not recovered."
        )


def check_readable(path: Path) -> None:
    """Raise HistoryUnreadable when the SQLite file at ``path`` exists but is not a database, fails
    ``PRAGMA quick_check``, is another program's database, or is locked by another program
    (``busy``). A missing or empty file is fine (it will be created). Never writes the file."""
    path = Path(path)
    if not path.exists():
        return
    if not path.is_file():
        raise HistoryUnreadable(path, "it is not a file")
    try:
        db = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise HistoryUnreadable(path, f"SQLite: {exc}") from None
    try:
        rows = db.execute("PRAGMA quick_check").fetchall()
        problems = [str(row[0]) for row in rows if row[0] != "ok"]
        if problems:
            more = f" and {len(problems) - 1} more problems" if len(problems) > 1 else ""
            raise HistoryUnreadable(path, f"SQLite's integrity check: {problems[0][:200]}{more}")
        _check_schema(db, path)
    except sqlite3.Error as exc:
        busy = getattr(exc, "sqlite_errorcode", None) in BUSY_CODES or "locked" in str(exc) or "busy" in str(exc)
        raise HistoryUnreadable(path, f"SQLite: {exc}", busy=busy) from None
    finally:
        db.close()


def _check_schema(db: sqlite3.Connection, path: Path) -> None:
    """Raise HistoryUnreadable when the database has tables but is not a studio history."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and not tables & STUDIO_TABLES:
        shown = ", ".join(sorted(tables)[:5])
        raise HistoryUnreadable(
            path, f"it is an SQLite database of another program (tables: {shown}), not a run history"
        )
    for table, required in REQUIRED_COLUMNS.items():
        if table not in tables:
            continue
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        missing = sorted(required - columns)
        if missing:
            raise HistoryUnreadable(path, f"its {table} table lacks {', '.join(missing)}: it is not a run history")
