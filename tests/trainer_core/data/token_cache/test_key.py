"""The cache key: each setting that changes tokens changes it, the same content under another
path keeps it, and splits that are not cached get none."""

from __future__ import annotations

import os
import shutil

import pytest

from trainer_core.data.token_cache.key import KEY_CHARS, TOKEN_SETTINGS, cache_key
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType, TrainingMethod

CHANGED = {
    "format_type": FormatType.alpaca,
    "custom_format_mapping": {"instruction": "prompt"},
    "dataset_slice_start": 1,
    "dataset_slice_end": 5,
    "val_size": 0.1,
    "random_seed": 7,
    "max_seq_length": 64,
    "train_on_completions": False,
    "default_chat_template": "llama3",
    "packing": True,
    "subset": "other",
}


@pytest.fixture
def data_file(tmp_path, datasets_dir):
    file = tmp_path / "a" / "rows.json"
    file.parent.mkdir()
    shutil.copy(datasets_dir / "alpaca_en_demo.json", file)
    return file


def _request(file, **fields) -> TrainingStartRequest:
    return TrainingStartRequest.model_construct(
        **{**TrainingStartRequest(local_datasets=[str(file)]).model_dump(), **fields}
    )


def test_the_key_is_hex_and_names_what_it_holds(data_file, tokenizer):
    key = cache_key(_request(data_file), tokenizer, "train")
    assert len(key.key) == KEY_CHARS and int(key.key, 16) >= 0
    assert key.sources == ("rows.json",) and key.split == "train" and key.model == tokenizer.name_or_path.split("/")[-1]
    assert cache_key(_request(data_file), tokenizer, "train") == key  # stable


@pytest.mark.parametrize("name", [n for n in TOKEN_SETTINGS if n != "training_method"])  # below: not cached
def test_each_setting_that_changes_tokens_changes_the_key(data_file, tokenizer, name):
    base = cache_key(_request(data_file), tokenizer, "train").key
    assert getattr(_request(data_file), name) != CHANGED[name]
    assert cache_key(_request(data_file, **{name: CHANGED[name]}), tokenizer, "train").key != base


def test_content_split_and_template_change_the_key_and_the_path_does_not(data_file, tmp_path, tokenizer, monkeypatch):
    base = cache_key(_request(data_file), tokenizer, "train").key
    elsewhere = tmp_path / "b" / "copy.json"
    elsewhere.parent.mkdir()
    shutil.copy(data_file, elsewhere)
    assert cache_key(_request(elsewhere), tokenizer, "train").key == base
    assert cache_key(_request(data_file), tokenizer, "eval").key != base
    monkeypatch.setattr(tokenizer, "chat_template", tokenizer.chat_template + "{# another #}")
    assert cache_key(_request(data_file), tokenizer, "train").key != base
    monkeypatch.undo()
    data_file.write_text(data_file.read_text().replace("a", "b", 1))
    assert cache_key(_request(data_file), tokenizer, "train").key != base


def test_other_methods_are_not_cached(data_file, tokenizer):
    for method in (TrainingMethod.dpo, TrainingMethod.grpo):
        assert cache_key(_request(data_file, training_method=method), tokenizer, "train") is None


def test_hub_data_without_a_known_commit_is_not_cached(data_file, tokenizer, monkeypatch):
    from trainer_core.data.token_cache import key as key_module

    monkeypatch.setattr(key_module, "hub_revision", lambda request: None)
    assert cache_key(_request(data_file, hf_dataset="someone/data"), tokenizer, "train") is None
    monkeypatch.setattr(key_module, "hub_revision", lambda request: "abc123")
    with_hub = cache_key(_request(data_file, hf_dataset="someone/data"), tokenizer, "train")
    assert with_hub.sources == ("rows.json", "someone/data [train]")
    monkeypatch.setattr(key_module, "hub_revision", lambda request: "def456")  # a new commit: a new key
    assert cache_key(_request(data_file, hf_dataset="someone/data"), tokenizer, "train").key != with_hub.key


def test_a_file_is_hashed_once_while_it_stays_the_same(tmp_path, monkeypatch):
    from trainer_core.data.token_cache import key as key_module

    file = tmp_path / "rows.jsonl"
    file.write_text('{"text": "a"}\n')
    first = key_module.file_digest(file)
    hashed = []
    content = key_module._content_digest
    monkeypatch.setattr(key_module, "_content_digest", lambda path: hashed.append(path) or content(path))
    assert key_module.file_digest(file) == first and hashed == []
    file.write_text('{"text": "b"}\n')  # the same size, other bytes
    os.utime(file, ns=(file.stat().st_atime_ns, file.stat().st_mtime_ns + 1_000_000))
    assert key_module.file_digest(file) != first and hashed == [file]
