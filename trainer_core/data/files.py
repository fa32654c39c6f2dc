"""Read training data: local files (.json, .jsonl, .csv, .parquet, .txt) and Hub datasets.

Everything that goes wrong while reading becomes a ``DatasetError`` whose message names the file
(and the line, row or column when known) and says how to fix it. ``datasets`` does the reading; when
it fails, a small pass with the stdlib ``json`` module finds the exact place of the problem.
"""

from __future__ import annotations

import csv
import json
import logging
import tempfile
from pathlib import Path
from typing import Any, Optional

import datasets
import datasets.exceptions

log = logging.getLogger(__name__)

# extension -> datasets builder
BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"}
SUPPORTED = ", ".join(BUILDERS)


class DatasetError(ValueError):
    """Training data that cannot be used; the message names the file (row, column) and the fix."""


def read_files(paths: list[str]) -> datasets.Dataset:
    """Read and concatenate local data files (rows in file order).

    Each file needs the same columns. Raises DatasetError for a missing file, an unsupported
    extension, an empty file, malformed JSON (with line, column and JSONL row), a column with values
    of different types, or files whose columns disagree (naming both files).
    """
    if not paths:
        raise DatasetError("no data files given: add at least one .json, .jsonl, .csv, .parquet or .txt file")
    parts = [read_file(path) for path in paths]
    first = parts[0]
    for path, part in zip(paths[1:], parts[1:]):
        if set(part.column_names) != set(first.column_names):
            raise DatasetError(
                f"{Path(paths[0]).name} has columns {first.column_names} but {Path(path).name} has "
                f"{part.column_names}: give files of one layout together, or map columns with custom_format_mapping"
            )
    try:
        return datasets.concatenate_datasets([part.cast(first.features) if part.features != first.features else part for part in parts])
    except (ValueError, TypeError) as exc:
        raise DatasetError(
            f"{Path(paths[0]).name} and another file ({', '.join(Path(p).name for p in paths[1:])}) hold different "
            f"value types in the same columns ({exc}): make the columns hold the same kind of values"
        ) from exc


def read_file(path: str) -> datasets.Dataset:
    """Read one local file into a Dataset (``.txt``: one row per non-blank line, column ``text``;
    ``.csv``: every value as text). Raises DatasetError as described in ``read_files``."""
    file = Path(path).expanduser()
    builder = _check_file(file)
    kwargs: dict[str, Any] = {}
    if builder == "csv":
        kwargs["features"] = datasets.Features({name: datasets.Value("string") for name in _csv_header(file)})
    elif builder == "json":
        kwargs["parse_agent_traces"] = False  # keep the file's own columns
        # Checked with the stdlib first: pyarrow's JSON reader crashes the process (SIGSEGV) on some
        # malformed files, e.g. a top-level `null`, and the app previews files in its own process.
        problem = json_problem(file)
        if problem is not None:
            raise DatasetError(f"{file.name}: {problem}")
    with tempfile.TemporaryDirectory(prefix="studio-datasets-") as cache_dir:  # nothing stale is reused
        # datasets reads data_files as patterns (``*``, ``?``, ``[..]``, ``a::b`` chains): a name with
        # those could pull in other files than the one checked. It reads a plain-named link instead.
        plain = Path(cache_dir) / f"data{file.suffix.lower()}"
        plain.symlink_to(file.resolve())
        try:
            dataset = datasets.load_dataset(
                builder, data_files=[str(plain)], split="train", cache_dir=cache_dir, keep_in_memory=True, **kwargs
            )
        except Exception as exc:  # datasets raises many kinds (StopIteration, ValueError, its own errors)
            raise _explain_failure(file, builder, exc) from exc
    if builder == "text":
        dataset = dataset.filter(lambda text: bool(text.strip()), input_columns="text", keep_in_memory=True)
    if len(dataset) == 0:
        raise DatasetError(f"{file.name} has no rows: add data to it")
    check_column_types(dataset, file.name)
    log.info("read %s: %d rows, columns %s", file.name, len(dataset), dataset.column_names)
    return dataset


def _check_file(file: Path) -> str:
    """The builder for ``file``; DatasetError when it is missing, of an unknown kind, or empty."""
    builder = BUILDERS.get(file.suffix.lower())
    if builder is None:
        raise DatasetError(f"{file.name}: unsupported file type {file.suffix or '(none)'!r}; use one of {SUPPORTED}")
    if file.is_dir():
        raise DatasetError(f"{file} is a folder: give the path of a data file inside it")
    if not file.is_file():
        raise DatasetError(f"data file {file} does not exist: check the path or upload the file again")
    try:
        with file.open("rb") as handle:
            start = handle.read(65536)
    except OSError as exc:
        raise DatasetError(f"{file.name} cannot be read ({exc.strerror}): check its permissions") from exc
    if not start or (builder != "parquet" and not start.strip()):
        raise DatasetError(f"{file.name} is empty: add data to it")
    return builder


def _csv_header(file: Path) -> list[str]:
    """Column names from the first line of a CSV file."""
    with file.open(newline="", encoding="utf-8-sig") as handle:
        header = next(csv.reader(handle), [])
    if not any(name.strip() for name in header):
        raise DatasetError(f"{file.name} has no header line: the first line of a CSV file must name the columns")
    return header


def _explain_failure(file: Path, builder: str, exc: Exception) -> DatasetError:
    """A DatasetError saying why ``datasets`` could not read ``file`` (exact place for JSON)."""
    if "corresponds to no data" in str(exc):  # datasets' words for a file without rows
        return DatasetError(f"{file.name} has no rows: add data to it")
    problem = json_problem(file) if builder == "json" else None
    if problem is None:
        reason = str(exc.__cause__ or exc).strip() or type(exc).__name__
        problem = f"could not be read as {builder.upper()} ({reason}): check that the file is valid {builder.upper()}"
    return DatasetError(f"{file.name}: {problem}")


def json_problem(file: Path) -> Optional[str]:
    """The first problem in a JSON / JSON lines file ("line 3, column 7: ..."), or None if it parses
    to a list of objects whose columns each hold one type."""
    try:
        text = file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 text (byte {exc.start}): save it with UTF-8 encoding"
    if file.suffix.lower() == ".jsonl" or _looks_like_lines(text):
        rows, problem = _parse_json_lines(text)
    else:
        rows, problem = _parse_json_array(text)
    if problem is None:
        problem = mixed_type_problem(rows)
    return problem


def _looks_like_lines(text: str) -> bool:
    """True when a .json file holds JSON lines (several top-level objects)."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.msg == "Extra data"
    return False


def _parse_json_lines(text: str) -> tuple[list[dict], Optional[str]]:
    """Rows of a JSON lines text and the first problem (line, column and 1-based row) or None."""
    rows: list[dict] = []
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"line {line_no} (row {len(rows) + 1})"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            return rows, f"invalid JSON at {where}, column {exc.colno}: {exc.msg}; fix that line (one JSON object per line)"
        if not isinstance(row, dict):
            return rows, f"{where} is {_kind(row)}, not a JSON object: write one {{\"column\": value}} object per line"
        rows.append(row)
    return rows, None


def _parse_json_array(text: str) -> tuple[list[dict], Optional[str]]:
    """Rows of a JSON document (array of objects, or one object) and the first problem or None."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; fix the file there"
    data = [data] if isinstance(data, dict) else data
    if not isinstance(data, list):
        return [], f"holds {_kind(data)}: expected a JSON array of objects ([{{\"column\": value}}, ...]) or JSON lines"
    for index, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            return [], f"row {index} is {_kind(row)}, not an object: every array element must be {{\"column\": value}}"
    return data, None


def _kind(value: Any) -> str:
    """A reader's word for a JSON value's type."""
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
    """'column 'output' is text in row 1 but a number in row 7: ...' for the first column whose
    first-level values differ in type (missing and null values are ignored), else None."""
    first_seen: dict[str, tuple[int, str]] = {}
    for index, row in enumerate(rows, start=1):
        for column, value in row.items():
            if value is None:
                continue
            kind = _kind(value)
            seen = first_seen.setdefault(column, (index, kind))
            if seen[1] != kind:
                return (
                    f"column {column!r} is {seen[1]} in row {seen[0]} but {kind} in row {index}: "
                    "make every value of a column the same type (for example write numbers as text: \"7\")"
                )
    return None


def check_column_types(dataset: datasets.Dataset, source: str) -> None:
    """Raise DatasetError when a column holds values of different types. ``datasets`` (5.x) reads
    such a column without complaint as a ``Json`` feature, so only those columns need a look."""
    mixed = [name for name, feature in dataset.features.items() if isinstance(feature, datasets.Json)]
    if mixed:
        problem = mixed_type_problem(dataset.select_columns(mixed).to_list())
        if problem:
            raise DatasetError(f"{source}: {problem}")


def read_head(path: str, rows: int) -> list[dict]:
    """The first ``rows`` rows of a local file as plain dicts, reading only what is needed (a JSON
    array is parsed whole). Raises DatasetError (via ``read_file``'s checks) when the file is bad."""
    file = Path(path).expanduser()
    builder = _check_file(file)
    try:
        head = _HEAD_READERS[builder](file, rows)
    except (ValueError, OSError, csv.Error, ImportError):  # let the full reader find and name the problem
        head = None
    if head is None or mixed_type_problem(head):
        dataset = read_file(path)
        return dataset.select(range(min(rows, len(dataset)))).to_list()
    if not head:
        raise DatasetError(f"{file.name} has no rows: add data to it")
    return head


def _head_json(file: Path, rows: int) -> Optional[list[dict]]:
    if file.suffix.lower() == ".jsonl":
        with file.open(encoding="utf-8-sig") as handle:
            lines = [line for _, line in zip(range(rows), (line for line in handle if line.strip()))]
        parsed, problem = _parse_json_lines("".join(lines))
    else:
        text = file.read_text(encoding="utf-8-sig")
        parse = _parse_json_lines if _looks_like_lines(text) else _parse_json_array
        parsed, problem = parse(text)
    return None if problem else parsed[:rows]


def _head_csv(file: Path, rows: int) -> list[dict]:
    with file.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        return [{key: (value if value != "" else None) for key, value in row.items()} for _, row in zip(range(rows), reader)]


def _head_text(file: Path, rows: int) -> list[dict]:
    with file.open(encoding="utf-8") as handle:
        lines = (line.rstrip("\r\n") for line in handle)
        return [{"text": line} for _, line in zip(range(rows), (line for line in lines if line.strip()))]


def _head_parquet(file: Path, rows: int) -> list[dict]:
    import pyarrow.parquet as pq

    batch = next(pq.ParquetFile(file).iter_batches(batch_size=max(rows, 1)), None)
    return [] if batch is None else batch.to_pylist()[:rows]


_HEAD_READERS = {"json": _head_json, "csv": _head_csv, "text": _head_text, "parquet": _head_parquet}
