"""Is the run history readable? Checked before the studio opens ``studio.db`` for writing, so a
damaged file is named and left exactly as it was instead of ending start-up in a raw
``sqlite3.DatabaseError``.

The check opens the file read-only (SQLite URI ``mode=ro``: no journal, no WAL file, no header
write) and runs SQLite's ``PRAGMA quick_check`` (https://sqlite.org/pragma.html#pragma_quick_check:
the integrity check without the index-content comparison, O(N) in the file's size).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

RECOVERY_COMMAND = "finetune-studio-cli import-runs"


class HistoryUnreadable(RuntimeError):
    """The run history database cannot be read. The message names the file, says it was left
    untouched, and how to recover (move it aside; the runs are re-imported from their run folders)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        aside = f"{self.path}.broken"
        super().__init__(
            f"The run history {self.path} cannot be read ({reason}). It was left untouched. To recover: "
            f"stop the studio, move the file aside (mv {self.path} {aside}; also any {self.path.name}-wal and "
            f"{self.path.name}-shm beside it) and start again. The run folders are kept: the studio re-imports "
            f"the runs in them from their run.json and metrics.jsonl when it starts with a new history "
            f"(or run `{RECOVERY_COMMAND}`). Their queue and task records are not recovered."
        )


def check_readable(path: Path) -> None:
    """Raise HistoryUnreadable when the SQLite file at ``path`` exists but is not a database or
    fails ``PRAGMA quick_check``. A missing file is fine (it will be created). Never writes."""
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
    except sqlite3.Error as exc:
        raise HistoryUnreadable(path, f"SQLite: {exc}") from None
    finally:
        db.close()
    problems = [str(row[0]) for row in rows if row[0] != "ok"]
    if problems:
        more = f" and {len(problems) - 1} more problems" if len(problems) > 1 else ""
        raise HistoryUnreadable(path, f"SQLite's integrity check: {problems[0][:200]}{more}")
