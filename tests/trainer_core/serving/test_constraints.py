"""Forced calls and JSON answers: the constraint a request asks for is built in the model's call
format, and a random-weight model's answer under it always parses and matches the schema."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest

from tests.trainer_core.serving.test_generate import _loaded, _tiny
from trainer_core.serving.constraints import request_constraint
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.generate import generate
from trainer_core.serving.schemas import GenerationSettings
from trainer_core.serving.worker import with_calls
from trainer_core.tools.definitions import tool_list
from trainer_core.tools.parse import parse_calls

TOOLS = tool_list(
    [
        {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 14}, "room": {"enum": ["a", "b"]}},
                "required": ["days", "room"],
                "additionalProperties": False,
            },
        },
        {"name": "get_time", "parameters": {"type": "object", "properties": {}, "additionalProperties": False}},
    ]
)
ASKED = [{"role": "user", "content": "Book a room."}]


@pytest.fixture(scope="module")
def loaded(tokenizer):
    """The tiny random Llama, its context widened for the tools block (RoPE positions have no cap)."""
    return dataclasses.replace(_loaded(_tiny(len(tokenizer)), tokenizer), context_tokens=400)


def _said(loaded, request, seed):
    settings = GenerationSettings(temperature=1.0, max_new_tokens=48, seed=seed)
    fmt = "hermes"  # the bundled ChatML template has no tools: the fallback's format

    def generated(req, on_text):
        finish = generate(
            loaded, ASKED, settings, on_text, tools=req.get("tools"), constraint=request_constraint(req, fmt)
        )
        return {"finish_reason": finish.reason, "text": finish.text}

    return with_calls(request, loaded.tokenizer, lambda text: None, generated)


def test_a_required_or_named_call_always_parses_and_matches_its_schema(loaded):
    schemas = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
    for seed in range(3):
        done = _said(loaded, {"tools": TOOLS, "tool_choice": "required"}, seed)
        (call,) = done["tool_calls"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), schemas[call["function"]["name"]])
    named = {"type": "function", "function": {"name": "book"}}
    for seed in range(1):
        (call,) = _said(loaded, {"tools": TOOLS, "tool_choice": named}, seed)["tool_calls"]
        assert call["function"]["name"] == "book"
        assert 1 <= json.loads(call["function"]["arguments"])["days"] <= 14


def test_each_format_gets_its_own_wrapping_and_harmony_is_refused(loaded):
    hermes = request_constraint({"tools": TOOLS, "tool_choice": "required"}, "hermes")
    assert (hermes.prefix, hermes.suffix) == ("<tool_call>\n", "\n</tool_call>")
    llama = request_constraint({"tools": TOOLS, "tool_choice": "required"}, "llama3")
    assert "parameters" in json.dumps(llama.schema) and llama.prefix == ""
    mistral = request_constraint({"tools": TOOLS, "tool_choice": "required"}, "mistral")
    assert (mistral.prefix, mistral.suffix) == ("[TOOL_CALLS][", "]")
    settings = GenerationSettings(temperature=1.0, max_new_tokens=60, seed=1)
    for fmt, constraint in (("llama3", llama), ("mistral", mistral)):
        finish = generate(loaded, ASKED, settings, lambda text: None, constraint=constraint)
        assert finish.reason == "stop" and parse_calls(finish.text, fmt)[1], (fmt, finish.text)
    with pytest.raises(ChatInputError, match="harmony format") as refused:
        request_constraint({"tools": TOOLS, "tool_choice": "required"}, "harmony")
    assert refused.value.code == "tool_choice_not_supported" and refused.value.fields == ("tool_choice",)
    assert request_constraint({"tools": TOOLS, "tool_choice": "auto"}, "harmony") is None


def test_a_json_schema_answer_always_matches(loaded):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    shape = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    constraint = request_constraint({"response_format": shape}, "hermes")
    for seed in range(3):
        settings = GenerationSettings(temperature=1.0, max_new_tokens=40, seed=seed)
        finish = generate(loaded, ASKED, settings, lambda text: None, constraint=constraint)
        if finish.reason == "stop":
            jsonschema.validate(json.loads(finish.text), schema)
        else:
            assert finish.reason == "length"  # an unclosed JSON is never called complete
    assert request_constraint({"response_format": {"type": "text"}}, "hermes") is None
