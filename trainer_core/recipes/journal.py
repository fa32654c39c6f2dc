"""A recipe run's records written as they are made, so Stop (and even a killed worker) keeps them:
``made.jsonl`` holds every record made (its row, its output row or the gate that dropped it), and
each kept output row is appended to ``data.jsonl`` at once (before near-duplicates are removed;
the finished or stopped run rewrites it, ``output.write_result``). A resumed run reads ``made.jsonl``
back and skips the records in it."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from trainer_core.recipes.records import Record

MADE_FILE = "made.jsonl"


def _line(record: Record) -> dict[str, Any]:
    return {
        "record": record.index,
        "row": record.row,
        "output": record.output,
        "reason": record.reason,
        "detail": record.detail,
    }


def _open_whole_lines(path: Path) -> Any:
    """``path`` opened to append, after a line a killed process cut short (ended, so the next
    record starts a line of its own; the cut line is skipped when read)."""
    cut = False
    if path.is_file() and path.stat().st_size > 0:
        with path.open("rb") as done:
            done.seek(-1, 2)
            cut = done.read(1) != b"\n"
    handle = path.open("a", encoding="utf-8")
    if cut:
        handle.write("\n")
    return handle


class Journal:
    """Appends each record made to ``folder`` (``made.jsonl``; kept rows also to ``data_file``)."""

    def __init__(self, folder: Path, data_file: str) -> None:
        self.folder = Path(folder)
        self._made = _open_whole_lines(self.folder / MADE_FILE)
        self._data = _open_whole_lines(self.folder / data_file)
        self._lock = threading.Lock()

    def append(self, record: Record) -> None:
        """Write ``record`` now (flushed: a killed process keeps it)."""
        with self._lock:
            self._made.write(json.dumps(_line(record), ensure_ascii=False) + "\n")
            self._made.flush()
            if record.reason is None and record.output is not None:
                self._data.write(json.dumps(record.output, ensure_ascii=False) + "\n")
                self._data.flush()

    def close(self) -> None:
        """Close both files."""
        with self._lock:
            self._made.close()
            self._data.close()


def read_made(folder: Path) -> list[Record]:
    """The records in ``folder``'s ``made.jsonl``, one per index (the last line of a record wins;
    a line cut short by a killed process is skipped)."""
    path = Path(folder) / MADE_FILE
    found: dict[int, Record] = {}
    if not path.is_file():
        return []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            line = json.loads(text)
            record = Record(int(line["record"]), dict(line["row"]), line.get("output"), line.get("reason"))
            record.detail = str(line.get("detail") or "")
        except (ValueError, KeyError, TypeError):
            continue
        found[record.index] = record
    return [found[i] for i in sorted(found)]
