"""``data.row_sample``: seeded samples of JSON lines, Parquet, CSV and JSON array files that read
little of the file, with exact row counts and the rows as written in the file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainer_core.data.row_sample import can_sample, choose, sample_file

ROWS = 3000


def _rows(count: int = ROWS) -> list[dict]:
    return [{"instruction": f"Question {i}?", "input": "", "output": f"Answer {i}."} for i in range(count)]


def _lines(path: Path, rows: list[dict]) -> Path:
    text = "\n".join(json.dumps(row) for row in rows)  # no line break after the last row
    path.write_text(text.replace("\n", "\n\n", 1))  # one blank line after row 1, which is no row
    return path


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_choose_is_seeded_sorted_and_keeps_the_first_rows() -> None:
    picked = choose(1000, 10, 50, seed=7)
    assert list(picked[:10]) == list(range(10))
    assert len(picked) == 60 and len(set(picked)) == 60
    assert (np.diff(picked) > 0).all()
    assert (picked == choose(1000, 10, 50, seed=7)).all()
    assert not (picked == choose(1000, 10, 50, seed=8)).all()
    assert list(choose(30, 10, 50, seed=7)) == list(range(30))  # a small file is taken whole


def test_json_lines_are_sampled_by_offset_with_an_exact_count(tmp_path: Path) -> None:
    rows = _rows()
    source = _lines(tmp_path / "data.jsonl", rows)
    (tmp_path / "out").mkdir()
    sample = sample_file(str(source), tmp_path / "out", 20, 100, seed=3)
    assert sample.rows_total == ROWS and sample.exact
    assert sample.rows == 120 and sample.rows_parsed == 120
    assert _read_jsonl(sample.written) == [rows[i] for i in sample.picked]
    assert sample.lines[:3] == [1, 3, 4]  # file lines, the blank line 2 skipped
    assert sample.bytes_read < 1.2 * source.stat().st_size  # one counting pass and the sampled lines


def test_parquet_reads_only_some_row_groups(tmp_path: Path) -> None:
    rows = _rows(20_000)
    source = tmp_path / "data.parquet"
    pq.write_table(pa.Table.from_pylist(rows), source, row_group_size=200)  # 100 groups
    (tmp_path / "out").mkdir()
    sample = sample_file(str(source), tmp_path / "out", 10, 300, seed=1)
    assert sample.rows_total == 20_000 and sample.rows == 310
    written = pq.read_table(sample.written).to_pylist()
    assert written == [rows[i] for i in sample.picked]
    data_bytes = sum(pq.ParquetFile(source).metadata.row_group(g).total_byte_size for g in range(100))
    assert sample.bytes_read <= 0.4 * data_bytes  # at most 32 random groups and the first one


def test_csv_is_streamed_and_quoted_line_breaks_stay_in_their_row(tmp_path: Path) -> None:
    rows = [{"instruction": f"Line one {i}\nline two", "output": f"A{i}"} for i in range(2000)]
    source = tmp_path / "data.csv"
    with source.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["instruction", "output"])
        writer.writeheader()
        writer.writerows(rows)
    (tmp_path / "out").mkdir()
    sample = sample_file(str(source), tmp_path / "out", 5, 40, seed=2)
    assert sample.rows_total == 2000 and sample.rows == 45
    with sample.written.open(newline="") as handle:
        assert list(csv.DictReader(handle)) == [rows[i] for i in sample.picked]


def test_a_json_array_is_read_whole_and_sampled(tmp_path: Path) -> None:
    rows = _rows(500)
    source = tmp_path / "data.json"
    source.write_text(json.dumps(rows, indent=1))
    (tmp_path / "out").mkdir()
    sample = sample_file(str(source), tmp_path / "out", 5, 50, seed=2)
    assert sample.rows_total == 500 and sample.rows_parsed == 500  # said: no row boundaries to seek to
    assert json.loads(sample.written.read_text()) == [rows[i] for i in sample.picked]


@pytest.mark.parametrize("name", ["data.jsonl.gz", "data.parquet.zst", "folder"])
def test_compressed_files_and_folders_are_not_sampled(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.mkdir() if name == "folder" else path.write_bytes(b"x")
    assert not can_sample(str(path))
