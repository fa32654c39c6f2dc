"""The stdlib pass over a JSON / JSON lines file that says exactly where it is wrong.

``datasets`` (pyarrow) reads the rows; this pass runs first (pyarrow's JSON reader can crash the
process on some malformed files) and names the line, column and row of a problem. Compressed files
(``.json.gz``, ``.jsonl.zst``) are checked on their decompressed text, read through
``compressed.read_text`` (streamed, capped at ``compressed.MAX_DECOMPRESSED_BYTES``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.compressed import read_text, split_suffix
from trainer_core.data.errors import DatasetError

SCALARS = ("text", "a number", "true/false")  # kinds a column may mix: numbers and booleans become text later


def json_problem(file: Path) -> Optional[str]:
    """The first problem in a JSON / JSON lines file ("line 3, column 7: ..."), or None if it parses
    to a list of objects whose columns each hold one kind of value (text, numbers and true/false
    count as one kind: ``formats`` turns numbers and booleans in text fields into text). Raises
    DatasetError for a compressed file that decompresses to more than the cap (see ``json_rows``)."""
    text, problem = _text(file)
    if problem is not None:
        return problem
    if split_suffix(file)[0] == ".jsonl" or looks_like_lines(text):
        return parse_json_lines(text, keep=False)[1]  # one row at a time: memory flat in the rows
    rows, problem = parse_json_array(text)
    return problem if problem is not None else mixed_type_problem(rows)


def _text(file: Path) -> tuple[str, Optional[str]]:
    """(the file's decompressed text, None) or ("", why it cannot be read as text). Raises
    DatasetError (from ``compressed``) for a file that decompresses past the cap."""
    try:
        return read_text(file), None
    except DatasetError:
        raise
    except UnicodeDecodeError as exc:
        return "", f"is not UTF-8 text (byte {exc.start}): save it with UTF-8 encoding"
    except Exception as exc:  # noqa: BLE001 - gzip / zstandard raise their own kinds for damaged data
        return "", f"cannot be decompressed ({exc}): check that the file is complete and really {split_suffix(file)[1]}"


def json_rows(file: Path) -> tuple[list[dict], Optional[str]]:
    """The rows of a JSON / JSON lines file (decompressed) and the first problem in its syntax or
    shape (None when it is an array of objects, one object, or one object per line). Raises
    DatasetError (from ``compressed``) for a compressed file that decompresses to more than
    ``compressed.MAX_DECOMPRESSED_BYTES``; a damaged or truncated one is a problem ("cannot be
    decompressed (the Zstandard data ends early: the file is truncated): ...")."""
    text, problem = _text(file)
    if problem is not None:
        return [], problem
    if split_suffix(file)[0] == ".jsonl" or looks_like_lines(text):
        return parse_json_lines(text)
    return parse_json_array(text)


def looks_like_lines(text: str) -> bool:
    """True when a .json file holds JSON lines (several top-level objects)."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.msg == "Extra data"
    return False


def parse_json_lines(text: str, keep: bool = True) -> tuple[list[dict], Optional[str]]:
    """Rows of a JSON lines text and the first problem (line, column and 1-based row) or None.
    Without ``keep`` no row is kept (the list is empty) and the problem may also be a column
    that mixes kinds (``mixed_type_problem``'s words), found one row at a time."""
    rows: list[dict] = []
    kinds = ColumnKinds()
    count = 0
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        count += 1
        where = f"line {line_no} (row {count})"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            return (
                rows,
                f"invalid JSON at {where}, column {exc.colno}: {exc.msg}; fix that line (one JSON object per line)",
            )
        if not isinstance(row, dict):
            return rows, f'{where} is {kind_of(row)}, not a JSON object: write one {{"column": value}} object per line'
        if keep:
            rows.append(row)
        elif (problem := kinds.add(row, count)) is not None:
            return rows, problem
    return rows, None


def parse_json_array(text: str) -> tuple[list[dict], Optional[str]]:
    """Rows of a JSON document (array of objects, or one object) and the first problem or None."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; fix the file there"
    data = [data] if isinstance(data, dict) else data
    if not isinstance(data, list):
        return [], f'holds {kind_of(data)}: expected a JSON array of objects ([{{"column": value}}, ...]) or JSON lines'
    for index, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            return [], f'row {index} is {kind_of(row)}, not an object: every array element must be {{"column": value}}'
    return data, None


def kind_of(value: Any) -> str:
    """A reader's word for a JSON value's type ("text", "a number", "true/false", "a list", ...)."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def mixed_type_problem(rows: list[dict]) -> Optional[str]:
    """'column 'output' is text in row 1 but a list in row 7: ...' for the first column whose
    first-level values differ in kind, else None. Missing and null values are ignored, and text,
    numbers and true/false may share a column (they are all turned into text where text is needed)."""
    kinds = ColumnKinds()
    for index, row in enumerate(rows, start=1):
        if (problem := kinds.add(row, index)) is not None:
            return problem
    return None


class ColumnKinds:
    """The kind of value each column first held (and in which row), fed one row at a time."""

    def __init__(self) -> None:
        self.first_seen: dict[str, tuple[int, str]] = {}

    def add(self, row: dict, index: int) -> Optional[str]:
        """``mixed_type_problem``'s words for the first column of ``row`` (1-based ``index``) whose
        value differs in kind from the column's first, else None."""
        for column, value in row.items():
            if value is None:
                continue
            kind = kind_of(value)
            seen = self.first_seen.setdefault(column, (index, kind))
            if seen[1] != kind and not (seen[1] in SCALARS and kind in SCALARS):
                return (
                    f"column {column!r} is {seen[1]} in row {seen[0]} but {kind} in row {index}: "
                    "make every value of a column the same kind (text, or a list, or an object)"
                )
        return None
