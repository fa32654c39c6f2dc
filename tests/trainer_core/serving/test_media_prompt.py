"""A chat turn's media placed by its markers (or before its text), as training placed them; a marker
count that differs, and media the model does not read, refused naming the message."""

from __future__ import annotations

import pytest

from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.media_prompt import placed, refuse_other_media


def test_each_turns_clips_go_where_its_markers_are_or_before_its_text():
    messages = [
        {"role": "user", "content": "Hear this", "audios": ["data:audio/wav;base64,AA"]},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "And <audio>?", "audios": ["data:audio/wav;base64,BB"]},
    ]
    turns, clips = placed(messages, "audios", "<audio>", "audio clip")
    assert [t["content"] for t in turns] == ["<audio>Hear this", "Yes.", "And <audio>?"]
    assert clips == ["data:audio/wav;base64,AA", "data:audio/wav;base64,BB"]


def test_a_marker_count_that_differs_and_unread_media_are_refused_by_message():
    with pytest.raises(ChatInputError, match=r"messages\[0\]: it has 2 <audio> marker\(s\) and 1 audio clip\(s\)"):
        placed([{"role": "user", "content": "<audio><audio>", "audios": ["x"]}], "audios", "<audio>", "audio clip")
    with pytest.raises(ChatInputError, match=r"messages\[1\]: it holds images and this audio chat model"):
        refuse_other_media(
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b", "images": ["x"]}],
            "images",
            "audio chat",
        )
