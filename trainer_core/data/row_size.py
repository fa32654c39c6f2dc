"""The size limits of one data row, applied where rows are read (``files``, ``hub_data``), before
anything is normalised or tokenized.

A value of more than ``max_field_chars`` characters (``STUDIO_MAX_FIELD_CHARS``; bytes for binary
values such as a Hub image's bytes), or a row whose values hold more than ``max_row_chars``
together (``STUDIO_MAX_ROW_CHARS``), is refused naming the file, the row, the field and the figure.
Nested values (a conversation's turns) count every text inside them. Why: tokenizing one value
costs about 150 bytes of memory per token (1 M characters ~ 0.2 M tokens ~ 0.5 GB here), so a
single 100 MB row took a check to 17 GB; no training row is near these limits (``max_seq_length``
is at most 32,768 tokens, ~150,000 characters).

Reading itself is bounded first where a line is a row (``.jsonl``, ``.txt``, ``.csv``, a ``.json``
of JSON lines): ``check_line_lengths`` streams the file and refuses a line longer than
LINE_BYTES_PER_CHAR bytes per allowed character before any parser holds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from trainer_core.data.compressed import open_binary, split_suffix
from trainer_core.data.errors import DatasetError

FIELD_ENV, ROW_ENV = "STUDIO_MAX_FIELD_CHARS", "STUDIO_MAX_ROW_CHARS"
LINE_BYTES_PER_CHAR = 6  # the most bytes JSON writes one character in (``\u00e9``)
LINE_FORMATS = (".jsonl", ".txt", ".csv")  # a line is (at most) one row
ROW_PER_LINE = (".jsonl", ".txt")  # ...and each non-blank line is one row
SCAN_CHUNK = 8 * 2**20  # bytes read per step of the line scan


def limits() -> tuple[int, int]:
    """(characters per value, characters per row) from the settings (``STUDIO_MAX_FIELD_CHARS``,
    ``STUDIO_MAX_ROW_CHARS``)."""
    from trainer_core.settings import get_settings

    settings = get_settings()
    return settings.max_field_chars, settings.max_row_chars


def check_row_sizes(dataset: Any, source: str, first_row: int = 1) -> None:
    """Raise DatasetError naming ``source``, the row (1-based, ``first_row`` being ``dataset[0]``'s)
    and the figure for the first row with a value over the per-value limit (a text inside a
    conversation is one value) or values over the per-row limit together. Measured on the Arrow
    columns (no row becomes Python)."""
    field_limit, row_limit = limits()
    if not len(dataset):
        return
    table = dataset.with_format("arrow")[:]
    totals = np.zeros(table.num_rows, dtype=np.int64)
    worst: Optional[tuple[int, str, int]] = None  # (row index, column, size) of the first value over
    for name in table.column_names:
        sizes, largest = value_sizes(table.column(name))
        totals += sizes
        over = np.flatnonzero(largest > field_limit)
        if over.size and (worst is None or over[0] < worst[0]):
            worst = (int(over[0]), name, int(largest[over[0]]))
    heavy = np.flatnonzero(totals > row_limit)
    if worst is not None and (not heavy.size or worst[0] <= heavy[0]):
        index, name, size = worst
        flat = _is_text(table.schema.field(name).type)
        what = f"field {name!r} is" if flat else f"a value in field {name!r} is"
        raise DatasetError(
            f"{source}, row {first_row + index}: {what} {size:,} characters, over the limit of {field_limit:,} for "
            f"one value: split or shorten it, or raise {FIELD_ENV}"
        )
    if heavy.size:
        index = int(heavy[0])
        raise DatasetError(
            f"{source}, row {first_row + index}: its values are {int(totals[index]):,} characters together, over "
            f"the limit of {row_limit:,} for one row: split or shorten it, or raise {ROW_ENV}"
        )


def value_sizes(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """(all, largest): per value of an Arrow array or chunked array, the characters (bytes for
    binary) of every text inside it (lists and structs included), and of its largest single text;
    0 for numbers, booleans and nulls. Each of shape (len(column),), int64."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        parts = [value_sizes(chunk) for chunk in column.chunks]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    return _array_sizes(column)


TEXT_KINDS = ("string", "large_string", "string_view")  # pyarrow.types.is_<kind>: measured in characters
BINARY_KINDS = ("binary", "large_binary", "binary_view", "fixed_size_binary")  # measured in bytes


def _is_text(kind: Any) -> bool:
    """Whether an Arrow type holds one text (or binary) per value."""
    import pyarrow as pa

    return any(getattr(pa.types, f"is_{name}")(kind) for name in (*TEXT_KINDS, *BINARY_KINDS))


def _array_sizes(array: Any) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind, rows = array.type, len(array)
    if pa.types.is_dictionary(kind):
        picked = array.indices.fill_null(0).to_numpy(zero_copy_only=False)
        total, largest = _array_sizes(array.dictionary)
        return total[picked], largest[picked]
    if _is_text(kind):
        characters = any(getattr(pa.types, f"is_{name}")(kind) for name in TEXT_KINDS)
        sizes = (pc.utf8_length if characters else pc.binary_length)(array)
        sizes = sizes.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return sizes, sizes
    total, largest = np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        inner_total, inner_largest = _array_sizes(array.flatten())
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        np.add.at(total, parents, inner_total)
        np.maximum.at(largest, parents, inner_largest)
    elif pa.types.is_struct(kind):
        for index in range(kind.num_fields):
            field_total, field_largest = _array_sizes(array.field(index))
            total += field_total
            np.maximum(largest, field_largest, out=largest)
    return total, largest


def line_scanned(file: Path, builder: str) -> bool:
    """Whether ``file``'s lines are rows (or parts of one): JSON lines, text, CSV, or a ``.json``
    file holding objects (JSON lines, or one object) rather than an array."""
    ext = split_suffix(file)[0]
    if ext in LINE_FORMATS:
        return True
    if builder != "json":
        return False
    with open_binary(file) as handle:
        start = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return start.startswith(b"{")


def check_line_lengths(file: Path, builder: str, rows: Optional[int] = None) -> None:
    """Raise DatasetError when a line of ``file`` (decompressed, streamed; only its first ``rows``
    non-blank lines with ``rows``) is longer than a row may be written in: LINE_BYTES_PER_CHAR bytes
    per character of ``STUDIO_MAX_ROW_CHARS``. Nothing for files whose lines are not rows
    (``line_scanned``). The longest line is never held whole: reading stops inside it."""
    if not line_scanned(file, builder):
        return
    bound = LINE_BYTES_PER_CHAR * limits()[1]
    line, carried, rows_seen = 1, 0, 0  # current line number, its bytes so far, non-blank lines before it
    with open_binary(file) as handle:
        while chunk := handle.read(SCAN_CHUNK):
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)  # (newlines,)
            pieces = np.diff(np.concatenate(([-1], ends, [len(chunk)]))) - 1  # bytes of each line part
            lengths = pieces.copy()
            lengths[0] += carried  # the first part continues the line begun in an earlier chunk
            seen = rows_seen + np.cumsum(lengths[: len(ends)] > 0)  # non-blank lines up to each ended line
            done = rows is not None and bool(seen.size) and seen[-1] >= rows
            if done:
                lengths = lengths[: int(np.argmax(seen >= rows)) + 1]  # up to the rows-th non-blank line
            too_long = np.flatnonzero(lengths > bound)
            if too_long.size:
                first = int(too_long[0])
                _refuse(file, line + first, int(seen[first - 1]) if first else rows_seen, bound)
            if done:
                return
            rows_seen = int(seen[-1]) if seen.size else rows_seen
            line += len(ends)
            carried = int(lengths[-1]) if not len(ends) else int(pieces[-1])


def _refuse(file: Path, line: int, rows_before: int, bound: int) -> None:
    """The DatasetError for line ``line`` of ``file`` (``rows_before`` non-blank lines before it)."""
    row = f" (row {rows_before + 1})" if split_suffix(file)[0] in ROW_PER_LINE else ""
    raise DatasetError(
        f"{file.name}, line {line}{row}: the line is longer than {bound:,} bytes, more than one row may be written "
        f"in ({LINE_BYTES_PER_CHAR} bytes for each of the {limits()[1]:,} characters of {ROW_ENV}): split or "
        f"shorten that row, or raise {ROW_ENV}"
    )


__all__ = ["check_line_lengths", "check_row_sizes", "limits", "value_sizes"]
