"""OpenAI ``input_audio`` content parts in chat requests: each clip becomes the turn's ``audios``
entry (a data: URL) and an ``<audio>`` marker where it stood; a part without data or with a format
that is not audio refused naming the part (OpenAI's 400)."""

from __future__ import annotations

import pytest

from api.openai_errors import OpenAIError
from api.openai_schemas import ChatCompletionRequest


def request(*parts: dict) -> ChatCompletionRequest:
    return ChatCompletionRequest(model="base", messages=[{"role": "user", "content": list(parts)}])


def test_an_input_audio_part_becomes_a_clip_and_its_marker():
    clip = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    [message] = request({"type": "text", "text": "Hear "}, clip, {"type": "text", "text": " this?"}).chat_messages()
    assert message.content == "Hear <audio> this?" and message.audios == ["data:audio/wav;base64,UklGRg=="]
    assert message.images == []


@pytest.mark.parametrize(
    ("inner", "words"),
    [({"data": "", "format": "wav"}, "needs"), ({"data": "UklGRg==", "format": "exe"}, "input_audio format 'exe'")],
    ids=["no-data", "not-audio"],
)
def test_a_bad_input_audio_part_is_refused_naming_it(inner, words):
    with pytest.raises(OpenAIError, match=words) as refused:
        request({"type": "input_audio", "input_audio": inner}).chat_messages()
    assert refused.value.param == "messages[0].content[0].input_audio"
