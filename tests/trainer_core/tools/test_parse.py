"""Calls read back from answers: each family's real template writes an assistant turn with calls, and
its format's parser gives back the same names and arguments; broken calls stay text."""

from __future__ import annotations

import json

import pytest

from tests.support.chat_templates import FILES, with_template
from trainer_core.data.template_fit import fit_conversation, template_fit
from trainer_core.tools.definitions import tool_list
from trainer_core.tools.parse import CallSplitter, call_format, call_start, parse_calls
from trainer_core.tools.render import call_text, template_conversation

TOOLS = tool_list(
    [
        {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}},
        {"name": "get_time", "description": "Time", "parameters": {"type": "object", "properties": {}}},
    ]
)
CALLS = [("get_weather", {"city": "Paris", "days": [1, 2], "deep": {"unit": "c"}}), ("get_time", {})]
FORMAT = {
    "qwen2.5": "hermes",
    "hermes3": "hermes",
    "llama3.1": "llama3",
    "mistral-nemo": "mistral",
    "gpt-oss": "harmony",
    "gemma2": "hermes",  # no tools in its template: the fallback's format
}
ONE_CALL = ("llama3.1", "gpt-oss")  # their templates render one call per turn


def rendered_answer(tokenizer, name: str, calls: list) -> str:
    """The assistant turn that ``name``'s real template writes for ``calls``: the rendered
    conversation after its generation prompt, the turn's end token left on (as generation stops)."""
    tok = with_template(tokenizer, name)
    user = [{"role": "user", "content": "Weather and time?"}]
    assistant = {"role": "assistant", "content": "\n".join(call_text(n, a) for n, a in calls)}
    turns, extra = template_conversation(tok, [*user, assistant], TOOLS)
    prompt, extra_prompt = template_conversation(tok, user, TOOLS)
    fit = template_fit(tok)
    whole = tok.apply_chat_template(fit_conversation(turns, fit), tokenize=False, **extra)
    start = tok.apply_chat_template(
        fit_conversation(prompt, fit), tokenize=False, add_generation_prompt=True, **extra_prompt
    )
    assert whole.startswith(start)
    return whole[len(start) :]


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_real_templates_calls_parse_back(tokenizer, name):
    tok = with_template(tokenizer, name)
    assert call_format(tok) == FORMAT[name] == call_format(tok.chat_template)
    calls = CALLS[:1] if name in ONE_CALL else CALLS
    answer = rendered_answer(tokenizer, name, calls)
    for end in ("<|im_end|>\n", "<|eot_id|>", "<end_of_turn>\n", "<|im_end|>"):
        answer = answer.removesuffix(end)  # generation stops at the end token; the streamer drops it
    content, parsed = parse_calls(answer, call_format(tok))
    assert content == "", (name, answer)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed] == calls, answer
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in parsed)
    assert len({c["id"] for c in parsed}) == len(parsed)


def test_text_before_calls_and_plain_answers():
    text = "Let me check.\n" + call_text("get_time", {})
    content, calls = parse_calls(text, "hermes")
    assert content == "Let me check." and calls[0]["function"] == {"name": "get_time", "arguments": "{}"}
    assert parse_calls("It is sunny.", "hermes") == ("It is sunny.", [])
    assert parse_calls("It is sunny.", "llama3") == ("It is sunny.", [])
    assert call_start("It is sunny.", "hermes") is None and call_start("Ok {", "llama3") is None
    assert call_start(text, "hermes") == len("Let me check.\n")
    assert parse_calls(
        '<|python_tag|>{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}', "llama3"
    )[1][1]["function"] == {"name": "g", "arguments": "{}"}
    named = parse_calls('[TOOL_CALLS]get_time[ARGS]{"zone": "UTC"}', "mistral")[1]
    assert named[0]["function"] == {"name": "get_time", "arguments": '{"zone": "UTC"}'}
    assert call_format("{{ messages }}") == "hermes"


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("hermes", "<tool_call>\n{nope\n</tool_call>"),
        ("hermes", '<tool_call>\n{"arguments": {}}\n</tool_call>'),
        ("hermes", '<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>'),
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><tool_call>\n{"name": "g", "argu'),
        ("llama3", '{"name": "f", "parameters": {"a": 1}'),
        ("llama3", '{"answer": 42}'),
        ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {}}'),
        ("mistral", "[TOOL_CALLS]nothing"),
        ("harmony", '<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{"a": '),
        ("harmony", "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>[1]<|call|>"),
        ("nonsense", "<tool_call>\n{\n</tool_call>"),
    ],
)
def test_broken_calls_stay_text(fmt, text):
    assert parse_calls(text, fmt) == (text, [])
    assert call_start(text, fmt) is not None  # begun: an evaluation counts it as an attempt


@pytest.mark.parametrize(
    ("fmt", "text", "shown", "names"),
    [
        (
            "hermes",
            "Sure.\n" + call_text("get_time", {}) + "\n" + call_text("f", {"x": 1}),
            "Sure.\n",
            ["get_time", "f"],
        ),
        ("hermes", "No call, just <tool_ words.", "No call, just <tool_ words.", []),
        ("hermes", "Sure.\n<tool_call>\n{broken\n</tool_call>", "Sure.\n<tool_call>\n{broken\n</tool_call>", []),
        ("llama3", '  {"name": "f", "parameters": {}}', "  ", ["f"]),
        ("mistral", 'Ok [TOOL_CALLS][{"name": "f", "arguments": {}}]', "Ok ", ["f"]),
    ],
)
def test_the_splitter_streams_text_until_a_call_starts(fmt, text, shown, names):
    sent: list[str] = []
    splitter = CallSplitter(fmt, sent.append)
    for i in range(0, len(text), 3):  # pieces that cut the start markers
        splitter.feed(text[i : i + 3])
    calls = splitter.finish()
    assert [c["function"]["name"] for c in calls] == names
    assert "".join(sent) == (shown if names else text)
