"""Read training data: local files (.json, .jsonl, .csv, .parquet, .txt; the text kinds also
compressed as .gz or .zst), folders of them, and folders written by ``save_to_disk``.

Everything that goes wrong while reading becomes a ``DatasetError`` whose message names the file
(and the line, row or column when known) and says how to fix it. ``datasets`` does the reading; when
it fails, a small pass with the stdlib ``json`` module (``json_check``) finds the exact place of the
problem. Hub datasets are read by ``hub_data``.
"""

from __future__ import annotations

import csv
import logging
import tempfile
from pathlib import Path
from typing import Any, Optional

import datasets
import datasets.exceptions

from trainer_core.data.compressed import BUILDERS, SUPPORTED, check_decompressed, data_suffix, open_text, split_suffix
from trainer_core.data.errors import DatasetError
from trainer_core.data.folders import load_saved, plan_folder
from trainer_core.data.json_check import (
    json_problem,
    kind_of,
    looks_like_lines,
    mixed_type_problem,
    parse_json_array,
    parse_json_lines,
)
from trainer_core.data.row_size import check_line_lengths, check_row_sizes
from trainer_core.vocabulary import FormatType

log = logging.getLogger(__name__)

__all__ = [
    "BUILDERS",
    "SUPPORTED",
    "DatasetError",
    "check_column_types",
    "json_problem",
    "kind_of",
    "mixed_type_problem",
    "read_file",
    "read_files",
    "read_head",
    "read_parts",
    "reading_notes",
    "rows_dataset",
]


def read_files(paths: list[str]) -> datasets.Dataset:
    """Read and concatenate local data files or folders (rows in file order).

    Each file needs the same columns. Raises DatasetError for a missing file, an unsupported
    extension, an empty file, malformed JSON (with line, column and JSONL row), a column mixing
    lists or objects with other values, or files whose columns disagree (naming both files).
    """
    if not paths:
        raise DatasetError(f"no data files given: add at least one file ({SUPPORTED}) or folder")
    return _join([(Path(path).name, read_file(path)) for path in paths])


def _join(parts: list[tuple[str, datasets.Dataset]]) -> datasets.Dataset:
    """The parts' rows in order; DatasetError naming two parts whose columns or types disagree."""
    first_name, first = parts[0]
    if len(parts) == 1:
        return first
    for name, part in parts[1:]:
        if set(part.column_names) != set(first.column_names):
            raise DatasetError(
                f"{first_name} has columns {first.column_names} but {name} has "
                f"{part.column_names}: give files of one layout together, or map columns with custom_format_mapping",
                fields=("custom_format_mapping",),
            )
    try:
        return datasets.concatenate_datasets(
            [part.cast(first.features) if part.features != first.features else part for _, part in parts]
        )
    except (ValueError, TypeError) as exc:
        raise DatasetError(
            f"{first_name} and another file ({', '.join(name for name, _ in parts[1:])}) hold different "
            f"value types in the same columns ({exc}): make the columns hold the same kind of values"
        ) from exc


def read_parts(path: str) -> list[tuple[str, datasets.Dataset]]:
    """(name, rows) for each file that ``path`` stands for: the file itself, or each data file of a
    folder (named ``folder/relative path``, so errors name the file), or the one saved dataset of a
    ``save_to_disk`` folder. Raises DatasetError as ``read_file`` does."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return [(folder.name, read_file(path))]
    plan = plan_folder(folder)
    if plan.saved:
        return [(folder.name, _checked(load_saved(folder), folder.name))]
    return [(f"{folder.name}/{file.relative_to(folder)}", read_file(str(file))) for file in plan.files]


def read_file(path: str) -> datasets.Dataset:
    """Read one local file (or folder: see ``read_parts``; its files joined) into a Dataset.

    ``.txt``: one row per non-blank line, column ``text``; ``.csv``: every value as text;
    ``.gz`` / ``.zst``: decompressed first, streamed; DatasetError when one decompresses to more
    than ``compressed.MAX_DECOMPRESSED_BYTES`` (2 GiB unless ``STUDIO_MAX_DATA_BYTES`` says) or is
    damaged or truncated. Raises DatasetError as described in ``read_files``.
    """
    file = Path(path).expanduser()
    if file.is_dir():
        return _join(read_parts(path))
    builder = _check_file(file)
    if builder != "json":  # (JSON is decompressed under the cap by json_problem)
        _check_decompression(file)  # before datasets decompresses the file whole, uncapped
    _check_lines(file, builder)  # no line longer than a row may be, before any parser holds one
    kwargs: dict[str, Any] = {}
    if builder == "csv":
        kwargs["features"] = datasets.Features({name: datasets.Value("string") for name in _csv_header(file)})
    elif builder == "json":
        kwargs["parse_agent_traces"] = False  # keep the file's own columns
        # Checked with the stdlib first: pyarrow's JSON reader crashes the process (SIGSEGV) on some
        # malformed files, e.g. a top-level `null`, and the app previews files in its own process.
        problem = json_problem(file)  # decompresses under the cap, too
        if problem is not None:
            raise DatasetError(f"{file.name}: {problem}")
    with tempfile.TemporaryDirectory(prefix="studio-datasets-") as cache_dir:  # nothing stale is reused
        # datasets reads data_files as patterns (``*``, ``?``, ``[..]``, ``a::b`` chains): a name with
        # those could pull in other files than the one checked. It reads a plain-named link instead,
        # whose suffix (``.jsonl.zst``) tells it how to decompress.
        plain = Path(cache_dir) / f"data{data_suffix(file)}"
        plain.symlink_to(file.resolve())
        try:
            dataset = datasets.load_dataset(
                builder, data_files=[str(plain)], split="train", cache_dir=cache_dir, keep_in_memory=True, **kwargs
            )
        except Exception as exc:  # datasets raises many kinds (StopIteration, ValueError, its own errors)
            raise _explain_failure(file, builder, exc) from exc
    if builder == "text":
        dataset = dataset.filter(lambda text: bool(text.strip()), input_columns="text", keep_in_memory=True)
    return _checked(dataset, file.name)


def _checked(dataset: datasets.Dataset, name: str) -> datasets.Dataset:
    """``dataset`` after the checks every source gets: rows present, column kinds not mixed, no
    value or row over the size limits (``row_size``)."""
    if len(dataset) == 0:
        raise DatasetError(f"{name} has no rows: add data to it")
    check_column_types(dataset, name)
    check_row_sizes(dataset, name)
    log.info("read %s: %d rows, columns %s", name, len(dataset), dataset.column_names)
    return dataset


def _check_file(file: Path) -> str:
    """The builder for ``file``; DatasetError when it is missing, of an unknown kind, or empty."""
    ext, compression = split_suffix(file)
    builder = BUILDERS.get(ext)
    if builder is None or (compression and builder == "parquet"):
        raise DatasetError(
            f"{file.name}: unsupported file type {data_suffix(file) or '(none)'!r}; use one of {SUPPORTED}"
        )
    if not file.is_file():
        raise DatasetError(f"data file {file} does not exist: check the path or upload the file again")
    try:
        with file.open("rb") as handle:
            start = handle.read(65536)
    except OSError as exc:
        raise DatasetError(f"{file.name} cannot be read ({exc.strerror}): check its permissions") from exc
    if not start or (builder != "parquet" and not compression and not start.strip()):
        raise DatasetError(f"{file.name} is empty: add data to it")
    return builder


def _check_lines(file: Path, builder: str, rows: Optional[int] = None) -> None:
    """``row_size.check_line_lengths`` (of the first ``rows`` rows), its decompression errors said
    as ``_check_decompression`` says them."""
    try:
        check_line_lengths(file, builder, rows)
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - gzip / zstandard raise their own kinds for damaged data
        raise DatasetError(
            f"{file.name}: cannot be decompressed ({exc}): check that the file is complete and really "
            f"{split_suffix(file)[1]}"
        ) from exc


def _check_decompression(file: Path) -> None:
    """DatasetError when compressed ``file`` decompresses to more than the cap, or is damaged or
    truncated (nothing for an uncompressed file). One streamed pass; nothing is kept."""
    try:
        check_decompressed(file)
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - gzip / zstandard raise their own kinds for damaged data
        raise DatasetError(
            f"{file.name}: cannot be decompressed ({exc}): check that the file is complete and really "
            f"{split_suffix(file)[1]}"
        ) from exc


def _csv_header(file: Path) -> list[str]:
    """Column names from the first line of a CSV file (decompressed)."""
    try:
        with open_text(file, newline="") as handle:
            header = next(csv.reader(handle), [])
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001 - gzip / zstandard / codecs raise their own kinds
        raise DatasetError(
            f"{file.name}: the first line cannot be read ({exc}): check that the file is valid CSV "
            "in UTF-8 (and complete, when compressed)"
        ) from exc
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


def check_column_types(dataset: datasets.Dataset, source: str) -> None:
    """Raise DatasetError when a column mixes lists or objects with other kinds of values.
    ``datasets`` (5.x) reads a mixed column without complaint as a ``Json`` feature, so only those
    columns need a look; text mixed with numbers or true/false is fine (``formats`` makes it text)."""
    mixed = [name for name, feature in dataset.features.items() if isinstance(feature, datasets.Json)]
    if mixed:
        problem = mixed_type_problem(dataset.select_columns(mixed).to_list())
        if problem:
            raise DatasetError(f"{source}: {problem}")


def reading_notes(
    path: str, format_type: FormatType = FormatType.auto, mapping: Optional[dict[str, str]] = None, method: Any = None
) -> list[str]:
    """What reading the local file or folder ``path`` changed or left out, for the preview and the
    pre-flight: files of a folder that were not read (and why), and per column the numbers and
    true/false values turned into text (e.g. "column 'output': 3 numbers and 1 boolean turned
    into text"), counted over every row. Reads and normalises the whole file (as training does;
    as preference data for a ``method`` other than sft). Raises DatasetError when the data cannot
    be used."""
    from trainer_core.data.formats import apply_mapping, detect_format, normalize_with_notes
    from trainer_core.data.preference import detect_preference_format, normalize_preference
    from trainer_core.model_kind import media_kind
    from trainer_core.vocabulary import TrainingMethod

    folder = Path(path).expanduser()
    notes = plan_folder(folder).notices if folder.is_dir() else []
    for name, dataset in read_parts(path):
        if mapping:
            dataset = apply_mapping(dataset, mapping, name)
        if method == TrainingMethod.grpo:
            continue  # prompts: read as they are written (data.prompts); nothing is turned into text
        if method is not None and method != TrainingMethod.sft:
            fmt = (
                detect_preference_format(dataset.column_names, method, name)
                if format_type == FormatType.auto
                else format_type
            )
            if fmt not in (FormatType.preference, FormatType.unpaired):
                continue  # the data layer refuses the pairing, in its words (data.preference)
            found = normalize_preference(dataset, fmt, name)[1]
        elif media_kind(dataset) is not None:
            continue  # rows with images: kept for a vision model, refused for a text-only one (data.prepare)
        else:
            fmt = detect_format(dataset.column_names, name) if format_type == FormatType.auto else format_type
            found = normalize_with_notes(dataset, fmt, name)[1]
        notes += [f"{name}: {note}" for note in found] if folder.is_dir() else found
    return notes


def rows_dataset(rows: list[dict]) -> datasets.Dataset:
    """A Dataset of plain-dict ``rows`` (columns: every key, in first-seen order; missing -> None).
    A column whose values differ in Python type (text beside numbers, 42 beside 3.5) gets a ``Json``
    feature, as ``datasets`` gives it when reading the file, so every value stays as written.
    Raises DatasetError when a column's values cannot be held together at all."""
    columns = {key: [row.get(key) for row in rows] for key in dict.fromkeys(key for row in rows for key in row)}
    mixed = {key for key, values in columns.items() if len({type(v) for v in values if v is not None}) > 1}
    try:
        if not mixed:
            return datasets.Dataset.from_dict(columns)
        features = {
            key: datasets.Json() if key in mixed else datasets.Dataset.from_dict({key: values}).features[key]
            for key, values in columns.items()
        }
        return datasets.Dataset.from_dict(columns, features=datasets.Features(features))
    except (ValueError, TypeError) as exc:  # pyarrow: e.g. lists of different kinds
        raise DatasetError(f"the values of a column differ in type ({exc}): make them one type") from None


def read_head(path: str, rows: int) -> list[dict]:
    """The first ``rows`` rows of a local file as plain dicts, reading only what is needed (a JSON
    array is parsed whole; a folder is read whole). Raises DatasetError (via ``read_file``'s
    checks) when the file is bad."""
    file = Path(path).expanduser()
    if file.is_dir():
        dataset = read_file(path)
        return dataset.select(range(min(rows, len(dataset)))).to_list()
    builder = _check_file(file)
    _check_lines(file, builder, rows)
    try:
        head = _HEAD_READERS[builder](file, rows)
    except DatasetError:  # e.g. a compressed file over the decompressed-size cap
        raise
    except Exception:  # noqa: BLE001 - (decoding, csv, decompression...) the full reader names the problem
        head = None
    if head is None or mixed_type_problem(head):
        dataset = read_file(path)
        return dataset.select(range(min(rows, len(dataset)))).to_list()
    if not head:
        raise DatasetError(f"{file.name} has no rows: add data to it")
    check_row_sizes(rows_dataset(head), file.name)
    return head


def _head_json(file: Path, rows: int) -> Optional[list[dict]]:
    with open_text(file) as handle:
        if split_suffix(file)[0] == ".jsonl":
            lines = [line for _, line in zip(range(rows), (line for line in handle if line.strip()))]
            parsed, problem = parse_json_lines("".join(lines))
        else:
            text = handle.read()
            parse = parse_json_lines if looks_like_lines(text) else parse_json_array
            parsed, problem = parse(text)
    return None if problem else parsed[:rows]


def _head_csv(file: Path, rows: int) -> list[dict]:
    with open_text(file, newline="") as handle:
        reader = csv.DictReader(handle)
        return [
            {key: (value if value != "" else None) for key, value in row.items()} for _, row in zip(range(rows), reader)
        ]


def _head_text(file: Path, rows: int) -> list[dict]:
    with open_text(file, encoding="utf-8") as handle:
        lines = (line.rstrip("\r\n") for line in handle)
        return [{"text": line} for _, line in zip(range(rows), (line for line in lines if line.strip()))]


def _head_parquet(file: Path, rows: int) -> list[dict]:
    import pyarrow.parquet as pq

    batch = next(pq.ParquetFile(file).iter_batches(batch_size=max(rows, 1)), None)
    return [] if batch is None else batch.to_pylist()[:rows]


_HEAD_READERS = {"json": _head_json, "csv": _head_csv, "text": _head_text, "parquet": _head_parquet}
