"""A sample of a local data file's rows read without loading the file: its first rows plus a seeded
uniform random sample of the rest, written to a small file of the same kind for the check to read.

How each kind is read (``sample_file``):

- JSON lines / ``.txt``: one pass counts the rows (non-blank lines) and keeps each line's byte offset
  (``numpy`` over 8 MiB blocks; 8 bytes a row); the chosen lines are then read by ``seek``. The count
  is exact.
- Parquet: the row count from the footer (exact); the random rows come from at most ``GROUPS`` row
  groups chosen at random (rows spread over them by size), so a file written in many groups is read
  in part. A file of one row group is read whole.
- CSV: a quoted value may hold line breaks, so lines are not rows: the file is streamed once in
  blocks by ``pyarrow.csv`` (every value as text, as ``files.read_file`` reads it) and a bottom-k
  sample of random keys is kept; the count is exact, the memory that of one block and the sample.
- A JSON array (``.json`` that is not JSON lines) is read whole (stdlib ``json``) and sampled in
  memory: it has no row boundaries to seek to.

Compressed files and folders are not sampled (None): the check reads them whole.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

BLOCK_BYTES = 8 * 2**20  # read size of the counting pass
GROUPS = 32  # Parquet row groups the random rows may come from
SAMPLED_KINDS = (".jsonl", ".json", ".txt", ".csv", ".parquet")


@dataclass
class RowSample:
    """``rows_total`` rows in the file (``exact`` False where counted approximately); ``picked``: the
    0-based file rows in the sample, in file order, the first ``first`` of them the file's first
    rows; ``bytes_read`` / ``rows_parsed``: what sampling cost. ``written``: the sample file."""

    name: str
    rows_total: int
    picked: np.ndarray
    first: int
    bytes_read: int
    rows_parsed: int
    exact: bool = True
    written: Optional[Path] = None
    lines: list[int] = field(default_factory=list)  # JSON lines / text: 1-based file line of each picked row

    @property
    def rows(self) -> int:
        """Rows in the sample."""
        return len(self.picked)


def can_sample(path: str) -> bool:
    """True for an uncompressed local file of a kind ``sample_file`` reads in part."""
    file = Path(path)
    return file.is_file() and file.suffix.lower() in SAMPLED_KINDS


def choose(total: int, first: int, random: int, seed: int) -> np.ndarray:
    """0-based rows: the first ``first`` and ``random`` drawn without replacement from the rest
    (``numpy.random.default_rng(seed)``), sorted; every row when the file has no more."""
    head = min(first, total)
    rest = total - head
    if rest <= random:
        return np.arange(total, dtype=np.int64)
    drawn = np.random.default_rng(seed).choice(rest, size=random, replace=False) + head
    return np.concatenate([np.arange(head, dtype=np.int64), np.sort(drawn).astype(np.int64)])


def sample_file(path: str, folder: Path, first: int, random: int, seed: int) -> RowSample:
    """Sample ``path`` (see the module docstring) and write the sample to ``folder``/<its name>."""
    file = Path(path)
    kind = file.suffix.lower()
    out = folder / file.name
    if kind in (".jsonl", ".txt") or (kind == ".json" and _is_lines(file)):
        return _lines(file, out, first, random, seed)
    if kind == ".parquet":
        return _parquet(file, out, first, random, seed)
    if kind == ".csv":
        return _csv(file, out, first, random, seed)
    return _json_array(file, out, first, random, seed)


def _is_lines(file: Path) -> bool:
    """A .json file whose first non-blank character opens an object (JSON lines), not an array."""
    with file.open("rb") as handle:
        return handle.read(4096).lstrip()[:1] == b"{"


def _line_starts(file: Path) -> tuple[np.ndarray, np.ndarray]:
    """(byte offset, 1-based line number) of each non-blank line, (rows,) each."""
    starts, size = [np.zeros(1, dtype=np.int64)], file.stat().st_size
    with file.open("rb") as handle:
        offset = 0
        while block := handle.read(BLOCK_BYTES):
            breaks = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
            starts.append(breaks.astype(np.int64) + offset + 1)
            offset += len(block)
    begin = np.concatenate(starts)
    begin = begin[begin < size]  # no line after a final line break
    ends = np.append(begin[1:], size)
    numbers = np.arange(1, len(begin) + 1, dtype=np.int64)
    longer = ends - begin > 2  # "\n" or "\r\n" alone is blank
    short = np.flatnonzero(~longer)
    if len(short):  # a line of one or two bytes is blank when it is only spaces
        with file.open("rb") as handle:
            for index in short:
                handle.seek(int(begin[index]))
                longer[index] = bool(handle.read(int(ends[index] - begin[index])).strip())
    return begin[longer], numbers[longer]


def _lines(file: Path, out: Path, first: int, random: int, seed: int) -> RowSample:
    begin, numbers = _line_starts(file)
    picked = choose(len(begin), first, random, seed)
    read = 0
    with file.open("rb") as handle, out.open("wb") as sink:
        for index in picked:
            handle.seek(int(begin[index]))
            line = handle.readline()
            read += len(line)
            sink.write(line if line.endswith(b"\n") else line + b"\n")
    sample = RowSample(file.name, len(begin), picked, min(first, len(begin)), file.stat().st_size + read, len(picked))
    sample.written, sample.lines = out, [int(numbers[i]) for i in picked]
    return sample


def _parquet(file: Path, out: Path, first: int, random: int, seed: int) -> RowSample:
    import pyarrow as pa
    import pyarrow.parquet as pq

    reader = pq.ParquetFile(file)
    sizes = np.array([reader.metadata.row_group(g).num_rows for g in range(reader.num_row_groups)], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    total = int(starts[-1])
    head = min(first, total)
    rng = np.random.default_rng(seed)
    groups = np.sort(rng.choice(len(sizes), size=min(GROUPS, len(sizes)), replace=False))
    pool = np.concatenate([np.arange(max(starts[g], head), starts[g + 1]) for g in groups])  # rows open to the draw
    drawn = np.sort(rng.choice(pool, size=min(random, len(pool)), replace=False)) if len(pool) else pool
    picked = np.concatenate([np.arange(head, dtype=np.int64), drawn.astype(np.int64)])
    parts, read = [], 0
    for g in np.unique(np.searchsorted(starts, picked, side="right") - 1):
        table = reader.read_row_group(int(g))
        read += reader.metadata.row_group(int(g)).total_byte_size
        inside = picked[(picked >= starts[g]) & (picked < starts[g + 1])] - starts[g]
        parts.append(table.take(pa.array(inside)))
    pq.write_table(pa.concat_tables(parts), out)
    sample = RowSample(file.name, total, picked, head, read, len(picked))
    sample.written = out
    return sample


def _csv(file: Path, out: Path, first: int, random: int, seed: int) -> RowSample:
    import pyarrow as pa
    from pyarrow import csv as pacsv

    with file.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    options = pacsv.ConvertOptions(column_types={name: pa.string() for name in header})
    rng = np.random.default_rng(seed)
    head_rows: list[dict] = []
    keys = np.zeros(0)
    kept: list[tuple[int, dict]] = []  # (file row, row) of the random sample so far
    total = 0
    for batch in pacsv.open_csv(file, convert_options=options):
        rows = batch.to_pylist()
        take = max(0, min(first - total, len(rows)))
        head_rows += rows[:take]
        fresh = rng.random(len(rows) - take)
        keys = np.concatenate([keys, fresh])
        kept += [(total + take + i, row) for i, row in enumerate(rows[take:])]
        if len(kept) > random:  # keep the rows of the ``random`` smallest keys (a uniform sample)
            best = np.sort(np.argsort(keys, kind="stable")[:random])
            keys, kept = keys[best], [kept[i] for i in best]
        total += len(rows)
    picked = np.array([*range(len(head_rows)), *(row for row, _ in kept)], dtype=np.int64)
    with out.open("w", newline="", encoding="utf-8") as sink:
        writer = csv.DictWriter(sink, fieldnames=header)
        writer.writeheader()
        writer.writerows([*head_rows, *(row for _, row in kept)])
    sample = RowSample(file.name, total, picked, len(head_rows), file.stat().st_size, total)
    sample.written = out
    return sample


def _json_array(file: Path, out: Path, first: int, random: int, seed: int) -> RowSample:
    rows = json.loads(file.read_text(encoding="utf-8"))
    rows = rows if isinstance(rows, list) else [rows]
    picked = choose(len(rows), first, random, seed)
    out.write_text(json.dumps([rows[i] for i in picked], ensure_ascii=False), encoding="utf-8")
    sample = RowSample(file.name, len(rows), picked, min(first, len(rows)), file.stat().st_size, len(rows))
    sample.written = out
    return sample


__all__ = ["GROUPS", "RowSample", "SAMPLED_KINDS", "can_sample", "choose", "sample_file"]
