"""The cache's folder: entries stored, listed, read back memory mapped, evicted least recently
used first down to the size setting, deleted by key and by nothing else."""

from __future__ import annotations

import time

import datasets
import pytest

from trainer_core.data.token_cache import store
from trainer_core.data.token_cache.key import CacheKey
from trainer_core.paths import PathNotAllowed
from trainer_core.settings import get_settings

ROW_BYTES = 4 * 1024  # each row's input_ids: 1,024 int32 values


def _stored(key: str, rows: int = 4) -> store.Entry:
    """An entry of ``rows`` rows of ROW_BYTES each under ``key`` (24 hex characters)."""
    ck = CacheKey(key=key, split="train", sources=("rows.jsonl",), model="tiny")
    staging = store.staging_folder(ck)
    features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int32"))})
    table = datasets.Dataset.from_dict({"input_ids": [[i] * 1024 for i in range(rows)]}, features=features)
    table.flatten_indices(cache_file_name=str(staging / "tokens.arrow"))
    return store.commit(staging, ck, rows, format="alpaca")


def test_a_stored_entry_is_listed_and_read_back_memory_mapped(cache_dir):
    entry = _stored("a" * 24)
    assert entry.size_bytes > 4 * ROW_BYTES and entry.format == "alpaca"
    listed = store.entries()
    assert [(e.key, e.sources, e.model, e.rows, e.split) for e in listed] == [
        ("a" * 24, ["rows.jsonl"], "tiny", 4, "train")
    ]
    assert not any(p.name.startswith(".staging") for p in cache_dir.iterdir())
    encoded, found = store.load(CacheKey("a" * 24, "train", (), "tiny"))
    assert encoded[3]["input_ids"][:2] == [3, 3] and found.last_used >= entry.last_used
    assert encoded.cache_files and encoded.cache_files[0]["filename"].startswith(str(cache_dir))  # on disk, mapped
    assert store.load(CacheKey("b" * 24, "train", (), "tiny")) is None


def test_the_least_recently_used_go_first_and_the_newest_stays(cache_dir, monkeypatch):
    monkeypatch.setenv("STUDIO_TOKEN_CACHE_MB", "1")
    get_settings.cache_clear()
    rows = 100  # ~0.4 MB an entry: two fit in 1 MB, three do not
    for key in ("1" * 24, "2" * 24):
        _stored(key, rows)
        time.sleep(0.01)
    store.load(CacheKey("1" * 24, "train", (), "tiny"))  # used again: "2" is now the oldest
    _stored("3" * 24, rows)
    assert {e.key for e in store.entries()} == {"1" * 24, "3" * 24}
    assert store.evict(0, keep="3" * 24) == ["1" * 24]  # the newest is kept even over the bound
    assert [e.key for e in store.entries()] == ["3" * 24]


def test_delete_takes_keys_only(cache_dir, tmp_path):
    _stored("c" * 24)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    for bad in ("../outside", "c" * 23, "C" * 24, "c" * 24 + "/..", "", "../../" + "c" * 24):
        with pytest.raises(store.UnknownCacheEntry):
            store.delete(bad)
    (cache_dir / ("d" * 24)).symlink_to(outside)  # a link planted in the cache
    with pytest.raises(PathNotAllowed):
        store.delete("d" * 24)
    assert (outside / "keep.txt").read_text() == "precious"
    with pytest.raises(store.UnknownCacheEntry):
        store.delete("e" * 24)
    assert store.delete("c" * 24).key == "c" * 24 and store.entries() == []


def test_a_damaged_entry_is_dropped_and_the_cache_can_be_off(cache_dir, monkeypatch):
    _stored("f" * 24)
    (cache_dir / ("f" * 24) / "tokens.arrow").write_bytes(b"not arrow")
    assert store.load(CacheKey("f" * 24, "train", (), "tiny")) is None
    assert not (cache_dir / ("f" * 24)).exists()
    monkeypatch.setenv("STUDIO_TOKEN_CACHE_MB", "0")
    get_settings.cache_clear()
    assert not store.enabled()
