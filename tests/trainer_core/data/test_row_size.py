"""The size limits of one data row (``data.row_size``): a value or a row over them is
refused by file, row and figure where rows are read, for the check, Start, training and the preview
alike, before anything is tokenized; and a line that could not be a row within them is refused
before any parser holds it."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from trainer_core.data import files as datafiles
from trainer_core.data.errors import DatasetError
from trainer_core.data.files import read_file, read_head
from trainer_core.data.prepare import load_conversations
from trainer_core.data.row_size import value_sizes
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings


@pytest.fixture
def small_limits(monkeypatch):
    """1,000 characters a value, 1,500 a row (lines of 9,000 bytes), through the environment."""
    monkeypatch.setenv("STUDIO_MAX_FIELD_CHARS", "1000")
    monkeypatch.setenv("STUDIO_MAX_ROW_CHARS", "1500")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def alpaca(output: str, instruction: str = "Say it.") -> dict:
    return {"instruction": instruction, "input": "", "output": output}


def test_a_value_over_the_limit_is_refused_by_file_row_and_figure_for_every_reader(tmp_path: Path, small_limits):
    path = tmp_path / "identity.json"
    path.write_text(json.dumps([alpaca("fine"), alpaca("é" * 1001)]), encoding="utf-8")
    said = (
        "identity.json, row 2: field 'output' is 1,001 characters, over the limit of 1,000 for one value: "
        "split or shorten it, or raise STUDIO_MAX_FIELD_CHARS"
    )
    with pytest.raises(DatasetError) as read:
        read_file(str(path))
    assert str(read.value) == said
    with pytest.raises(DatasetError) as trained:  # training's reader (and the check's, and Start's)
        load_conversations(TrainingStartRequest(local_datasets=[str(path)]))
    assert str(trained.value) == said
    with pytest.raises(DatasetError) as previewed:
        read_head(str(path), 5)
    assert str(previewed.value) == said
    assert len(read_head(str(path), 1)) == 1  # the preview of the first row alone reads only that row
    path.write_text(json.dumps([alpaca("é" * 1000)]), encoding="utf-8")
    assert len(read_file(str(path))[0]["output"]) == 1000  # at the limit: read


def test_one_turn_over_the_limit_is_named_by_its_field(tmp_path: Path, small_limits):
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([{"conversations": [{"from": "human", "value": "a" * 1001}]}]))
    with pytest.raises(DatasetError, match=r"^chats.json, row 1: a value in field 'conversations' is 1,001 characters"):
        read_file(str(path))


def test_a_row_over_the_limit_counts_every_text_of_a_conversation(tmp_path: Path, small_limits):
    turns = [{"from": "human", "value": "a" * 800}, {"from": "gpt", "value": "b" * 800}]  # each value within
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps({"conversations": chat}) + "\n" for chat in (turns[:1], turns)))
    with pytest.raises(DatasetError) as refused:
        read_file(str(path))
    assert str(refused.value) == (  # 5 + 800 + 3 + 800: the roles are text too
        "chats.jsonl, row 2: its values are 1,608 characters together, over the limit of 1,500 for one row: "
        "split or shorten it, or raise STUDIO_MAX_ROW_CHARS"
    )


def test_a_line_longer_than_any_row_is_refused_before_it_is_parsed(tmp_path: Path, small_limits, monkeypatch):
    path = tmp_path / "big.jsonl"
    rows = [json.dumps(alpaca("ok")), "", json.dumps(alpaca("x" * 20_000))]
    path.write_text("\n".join(rows) + "\n")

    def never(*args, **kwargs):
        raise AssertionError("the file was parsed")

    with monkeypatch.context() as patched:
        patched.setattr(datafiles, "json_problem", never)
        patched.setattr(datafiles.datasets, "load_dataset", never)
        with pytest.raises(DatasetError) as refused:
            read_file(str(path))
    assert str(refused.value) == (
        "big.jsonl, line 3 (row 2): the line is longer than 9,000 bytes, more than one row may be written in "
        "(6 bytes for each of the 1,500 characters of STUDIO_MAX_ROW_CHARS): split or shorten that row, or raise "
        "STUDIO_MAX_ROW_CHARS"
    )
    assert read_head(str(path), 1) == [alpaca("ok")]  # the preview's first row: the long line is not read


def test_binary_values_count_their_bytes_and_nulls_count_nothing():
    table = datasets.Dataset.from_dict(
        {"image": [b"\x00" * 7, None], "turns": [[{"role": "user", "content": "héllo"}], None], "n": [1, 2]}
    ).data
    measured = {name: [list(part) for part in value_sizes(table.column(name))] for name in ("image", "turns", "n")}
    assert measured == {"image": [[7, 0], [7, 0]], "turns": [[9, 0], [5, 0]], "n": [[0, 0], [0, 0]]}
