"""The cache accordion's handlers: the table lists what is kept, Delete removes the chosen entry
and refuses anything else in the notice, naming the "Cache entry" box."""

from __future__ import annotations

import datasets

from trainer_core.data.token_cache import store
from trainer_core.data.token_cache.key import CacheKey
from trainer_core.runs.job import JobRunner
from trainer_core.settings import Settings
from ui import token_cache_panel as panel
from ui.context import Context


def _context(tmp_path) -> Context:
    settings = Settings(data_dir=tmp_path / "data", token_cache_mb=64)
    return Context(runner=JobRunner(runs_dir=settings.runs_dir), settings=settings)


def _entry(ctx: Context, key: str, monkeypatch) -> None:
    monkeypatch.setattr(store, "get_settings", lambda: ctx.settings)
    ck = CacheKey(key=key, split="train", sources=("a.jsonl", "b.jsonl"), model="tiny")
    staging = store.staging_folder(ck)
    datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]] * 5}).flatten_indices(
        cache_file_name=str(staging / "tokens.arrow")
    )
    store.commit(staging, ck, 5)


def test_the_table_lists_entries_and_delete_takes_the_chosen_one(tmp_path, monkeypatch):
    ctx = _context(tmp_path)
    table, line = panel.cache_table(ctx)
    assert table.empty and line == panel.EMPTY
    _entry(ctx, "a" * 24, monkeypatch)
    table, line = panel.cache_table(ctx)
    assert table.iloc[0]["dataset files"] == "a.jsonl, b.jsonl" and table.iloc[0]["rows"] == 5
    assert table.iloc[0]["key"] == "a" * 24 and line.startswith("1 tokenized split, ") and "of 64 MB" in line
    for junk, said in (
        ("", "choose a row"),
        ("../../etc", "not a token cache key"),
        ("b" * 24, "no token cache entry"),
    ):
        table_update, _, notice, chosen = panel.delete(ctx, junk)
        assert f"Cache entry: {said}" in notice["value"] and len(table_update["value"]) == 1
    _, line, notice, chosen = panel.delete(ctx, "a" * 24)
    assert "Deleted the tokenized train split of a.jsonl, b.jsonl (5 rows)." in notice["value"]
    assert chosen["value"] == "" and line["value"] == panel.EMPTY
