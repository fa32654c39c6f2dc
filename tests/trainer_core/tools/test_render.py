"""Tools in prompts: one normal form of the definitions, and each real template's rendering of a
conversation with calls and results (structured where the template renders tools, else the fallback)."""

from __future__ import annotations

import json

import pytest

from tests.support.chat_templates import FILES, with_template
from trainer_core.data.template_fit import fit_conversation, template_fit
from trainer_core.tools.definitions import ToolsError, argument_errors, functions, tool_list
from trainer_core.tools.json_schema import schema_problem
from trainer_core.tools.render import call_text, split_calls, supports_tools, template_conversation

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"],
    },
}
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": call_text("get_weather", {"city": "Paris", "unit": "c"})},
    {"role": "tool", "content": '<tool_response>\n{"temp": 21}\n</tool_response>'},
    {"role": "assistant", "content": "It is 21 C in Paris."},
]


def test_every_shape_of_tools_becomes_one_form_and_bad_ones_name_their_field():
    wrapped = {"type": "function", "function": WEATHER}
    assert tool_list(json.dumps([WEATHER])) == tool_list([wrapped]) == tool_list(wrapped) == [wrapped]
    assert tool_list("") == tool_list(None) == tool_list("[]") == []
    bad = [
        ("[{", "tools: not valid JSON"),
        ([{"type": "web_search"}], "tools[0].type: 'web_search': only function tools"),
        ([{"name": "has space"}], "tools[0].name:"),
        ([WEATHER, WEATHER], "tools[1].function.name: 'get_weather' is defined twice"),
        ([{"name": "f", "parameters": {"type": "object", "properties": 3}}], "tools[0].parameters: not a valid JSON"),
        ([{"name": "f", "parameters": {"$ref": "https://example.com/s.json"}}], "points outside the schema"),
    ]
    for value, message in bad:
        with pytest.raises(ToolsError) as caught:
            tool_list(value)
        assert str(caught.value).startswith(message) or message in str(caught.value), str(caught.value)
    assert schema_problem(WEATHER["parameters"]) is None and schema_problem(3).startswith("not a JSON schema")
    weather = functions(tool_list([WEATHER]))["get_weather"]
    assert argument_errors(weather, {"city": "Paris", "unit": "c"}) is None
    assert argument_errors(weather, {"unit": "k"}).startswith("arguments")
    assert "arguments['unit']" in argument_errors(weather, {"city": "Paris", "unit": "k"})


def test_calls_come_out_of_canonical_text_and_bad_blocks_are_named():
    text = "Let me look.\n" + call_text("a", {"x": 1}) + "\n" + call_text("b", {})
    assert split_calls(text) == ("Let me look.", [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}])
    assert split_calls("no calls") == ("no calls", [])
    with pytest.raises(ToolsError, match="turn 3, call 1: not valid JSON"):
        split_calls("<tool_call>\n{nope\n</tool_call>", "turn 3")


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_real_template_renders_the_calls_and_results(tokenizer, name):
    tok = with_template(tokenizer, name)
    tools = tool_list([WEATHER])
    messages, extra = template_conversation(tok, CONVERSATION, tools)
    messages = fit_conversation(messages, template_fit(tok))  # as training and serving shape it (Gemma: no system)
    text = tok.apply_chat_template(messages, tokenize=False, **extra)
    assert "get_weather" in text and "Paris" in text and "21" in text and "It is 21 C in Paris." in text
    if name == "gemma2":  # no tools in its template: the fallback block, the Hermes call as trained text
        assert not supports_tools(tok) and extra == {}
        assert "<tools>" in text and '<tool_call>\n{"name": "get_weather"' in text
        return
    assert supports_tools(tok) and extra == {"tools": tools}
    assert "<tool_response>\n<tool_response>" not in text  # the wrapper is not doubled
    call = messages[2]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}
    assert len(call["id"]) == 9 and call["id"].isalnum() and messages[3]["tool_call_id"] == call["id"]
    expected = {
        "qwen2.5": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>',
        "hermes3": "<tool_call>",
        "llama3.1": '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}',
        "mistral-nemo": "[TOOL_CALLS]",
        "gpt-oss": "to=functions.get_weather",
    }[name]
    assert expected in text, text
