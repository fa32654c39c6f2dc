"""Evaluation's loss rows through the token cache: a full evaluation stores its split, a later one
(here of fewer rows) hits the entry and tokenizes nothing, and both give ``tokenize_rows``' rows
and counts; rows that are not whole data rows (tools: one per turn) are tokenized as before."""

from __future__ import annotations

import json

import pytest

from trainer_core.data import tokenization
from trainer_core.data.token_cache import store
from trainer_core.evaluation.cached_tokens import cached_loss_rows
from trainer_core.evaluation.loss import tokenize_rows
from trainer_core.evaluation.rows import to_rows
from trainer_core.evaluation.sources import read_plan
from trainer_core.settings import get_settings


@pytest.fixture
def plan(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("STUDIO_TOKEN_CACHE_MB", "64")
    get_settings.cache_clear()
    file = tmp_path / "held_out.jsonl"
    rows = [{"instruction": f"Count to {i}.", "output": " ".join(str(n) for n in range(i))} for i in range(1, 13)]
    file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    yield {"files": [str(file)], "source": file.name, "max_seq_length": 48}
    get_settings.cache_clear()


def test_a_second_evaluation_hits_the_cache(plan, tokenizer, monkeypatch):
    canonical = read_plan(plan)
    rows, _ = to_rows(canonical, plan["source"])
    encoded, truncated, dropped = cached_loss_rows(plan, rows, canonical, tokenizer)
    expected = tokenize_rows(rows, tokenizer, 48)
    assert encoded["input_ids"] == expected[0]["input_ids"] and encoded["labels"] == expected[0]["labels"]
    assert (truncated, dropped) == expected[1:] and truncated > 0
    assert len(store.entries()) == 1

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(tokenization, "encode_rows", no_tokenizing)
    some = rows[3:9]
    encoded, truncated, dropped = cached_loss_rows(plan, some, canonical, tokenizer)
    monkeypatch.undo()
    expected = tokenize_rows(some, tokenizer, 48)
    assert encoded["input_ids"] == expected[0]["input_ids"] and (truncated, dropped) == expected[1:]


def test_rows_that_are_not_whole_data_rows_are_tokenized_as_before(plan, tokenizer):
    canonical = read_plan(plan)
    rows, _ = to_rows(canonical, plan["source"])
    rows[0].tools = '[{"name": "f"}]'
    assert cached_loss_rows(plan, rows, canonical, tokenizer) is None
    assert store.entries() == []
