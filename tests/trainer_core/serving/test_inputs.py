"""What a chat or embeddings request must hold (``serving.inputs``): each refusal a ChatInputError
naming the field (``input``, ``messages``) and the text or message at fault."""

import pytest

from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.inputs import checked_inputs, checked_messages
from trainer_core.serving.schemas import MAX_EMBEDDING_INPUT_CHARS, MAX_EMBEDDING_INPUTS


def test_texts_within_the_limits_pass_as_they_are():
    texts = ["a", "y" * MAX_EMBEDDING_INPUT_CHARS]
    assert checked_inputs(texts) is texts and len(checked_inputs(["x"] * MAX_EMBEDDING_INPUTS)) == 2048


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([], "input: give a text or a list of 1 or more texts"),
        ("a", "input: give a text or a list"),
        (["a", " "], r"input\[1\]: give a non-empty text"),
        (["a", None], r"input\[1\]: give a non-empty text"),
        (["x"] * 2049, "input: at most 2048 texts in one request, not 2049"),
        (["y" * 40_000], r"input\[0\]: at most 32,768 characters a text, not 40,000"),
        (["ok", "a\ud800b"], r"input\[1\]: the text holds characters that are not valid text \(lone surrogates\)"),
    ],
)
def test_bad_texts_are_refused_naming_input(texts, message):
    with pytest.raises(ChatInputError, match=message) as refused:
        checked_inputs(texts)
    assert refused.value.fields == ("input",) and refused.value.status == 400


def test_messages_end_with_the_users():
    assert checked_messages([{"role": "user", "content": "hi"}]) == [
        {"role": "user", "content": "hi", "images": [], "audios": []}
    ]
    with pytest.raises(ChatInputError, match="the last message must be the user's") as refused:
        checked_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    assert refused.value.fields == ("messages",)


def test_a_tools_result_follows_a_call_and_may_end_the_conversation():
    call = {"role": "assistant", "content": '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'}
    result = {"role": "tool", "content": "<tool_response>\n1\n</tool_response>"}
    turns = checked_messages([{"role": "user", "content": "hi"}, call, result, result])
    assert [t["role"] for t in turns] == ["user", "assistant", "tool", "tool"]
    with pytest.raises(ChatInputError, match=r"messages\[1\]: a tool's result must follow the assistant's call"):
        checked_messages([{"role": "user", "content": "hi"}, result])
