"""``tokenized``: a miss reads and tokenizes the rows and stores them, a hit reads nothing else;
the tokens are those ``tokenize_dataset`` makes; with the cache off nothing is kept."""

from __future__ import annotations

import json

import pytest

from trainer_core.data.prepare import load_conversations
from trainer_core.data.token_cache import store
from trainer_core.data.token_cache.tokenized import ROWS_PER_PROCESS, processes, tokenized
from trainer_core.data.tokenization import finish_rows, tokenize_dataset
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings


@pytest.fixture
def request_(tmp_path):
    file = tmp_path / "chat.jsonl"
    rows = [
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"Say {i}."},
                {"role": "assistant", "content": f"{i}"},
            ]
        }
        for i in range(40)
    ]
    file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return TrainingStartRequest(local_datasets=[str(file)], max_seq_length=64)


def test_a_miss_stores_and_a_hit_reads_nothing(cache_dir, request_, tokenizer):
    read = []

    def rows():
        read.append(1)
        canonical, fmt = load_conversations(request_)
        return canonical, fmt.value

    first, miss = tokenized(request_, tokenizer, "train", rows)
    assert read == [1] and not miss.hit and miss.rows == 40 and miss.system_message == "Be brief."
    assert miss.format == "messages" and miss.line().startswith(f"data: cache miss (stored) {miss.key}, 40 rows, ")
    second, hit = tokenized(request_, tokenizer, "train", rows)
    assert read == [1] and hit.hit and hit.key == miss.key and hit.system_message == "Be brief."
    assert hit.line().startswith(f"data: cache hit {hit.key}, 40 rows, ") and hit.line().endswith(" s")
    assert second["input_ids"] == first["input_ids"]
    expected, stats = tokenize_dataset(load_conversations(request_)[0], tokenizer, 64, True)
    kept, cached_stats = finish_rows(second, 64)
    assert kept["input_ids"] == expected["input_ids"] and kept["labels"] == expected["labels"]
    assert cached_stats == stats
    assert [e.key for e in store.entries()] == [hit.key]


def test_with_the_cache_off_nothing_is_kept(cache_dir, request_, tokenizer, monkeypatch):
    monkeypatch.setenv("STUDIO_TOKEN_CACHE_MB", "0")
    get_settings.cache_clear()
    encoded, hit = tokenized(request_, tokenizer, "train", lambda: (load_conversations(request_)[0], "messages"))
    assert hit.key is None and not hit.hit and len(encoded) == 40
    assert hit.line().startswith("data: not cached, tokenized 40 rows, ")
    assert not cache_dir.exists() or not any(cache_dir.iterdir())


def test_processes_follow_the_rows_and_the_cores():
    assert processes(10) == 1
    assert 1 <= processes(100 * ROWS_PER_PROCESS) <= 64
    assert processes(2 * ROWS_PER_PROCESS) <= 2
