"""Conversation rows given an empty media column to join media rows; raw text rows refused (a media
chat model trains on conversations)."""

from __future__ import annotations

import datasets
import pytest

from trainer_core.data.errors import DatasetError
from trainer_core.data.media_prepare import with_media_column


def test_conversations_get_an_empty_media_list_and_raw_text_is_refused():
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    rows = with_media_column(datasets.Dataset.from_dict({"messages": [turns]}), "audios")
    assert rows.column_names == ["messages", "audios"] and rows[0]["audios"] == []
    assert with_media_column(None, "audios") is None
    with pytest.raises(DatasetError, match="raw text rows cannot train this model here: .* with or without audios"):
        with_media_column(datasets.Dataset.from_dict({"text": ["plain"]}), "audios")
