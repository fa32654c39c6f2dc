"""Constrained decoding on the tiny random SmolLM2 (its outputs are noise, so only the constraint
can make them parse): 20 sampled answers (one batch of ``model.generate``: rows end at different
steps) under a schema with required fields, enums and a nested object all parse and validate; a tool call keeps its literal prefix / suffix and the named function;
an answer cut by ``max_new_tokens`` ends with ``length``; a schema llguidance cannot compile is
refused with ``schema_not_supported`` and the field it came from."""

import json
from pathlib import Path

import jsonschema
import pytest
import torch
from transformers import AutoModelForCausalLM

from trainer_core.refusals import Refusal
from trainer_core.serving.generate import generate, render_prompt, stop_token_ids
from trainer_core.serving.loader import LoadedModel
from trainer_core.serving.schemas import GenerationSettings, ModelChoice
from trainer_core.tools.constrain import (
    JSON_OBJECT,
    SchemaNotSupported,
    call_constraint,
    call_schema,
    response_constraint,
    response_schema,
)

MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "integer", "minimum": -90, "maximum": 90}, "ok": {"type": "boolean"}},
            "required": ["lat", "ok"],
            "additionalProperties": False,
        },
    },
    "required": ["city", "unit", "days", "where"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]


@pytest.fixture(scope="module")
def loaded(tiny_model_dir: Path, tokenizer) -> LoadedModel:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    choice = ModelChoice(id="x", label="x", kind="base", base_model="tiny", path=None, adapter=False)
    return LoadedModel(choice, model, tokenizer, "cpu", Path("."), 2048, 0.0)


def _answer(loaded, constraint, seed=0, max_new_tokens=80, temperature=1.0):
    settings = GenerationSettings(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    return generate(loaded, MESSAGES, settings, on_text=lambda text: None, constraint=constraint)


def test_twenty_sampled_answers_of_a_random_model_parse_and_match_the_schema(loaded):
    constraint = response_constraint({"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}})
    stops = stop_token_ids(loaded.tokenizer, loaded.model)
    prompt = torch.tensor([render_prompt(loaded.tokenizer, MESSAGES)])  # (1, T)
    torch.manual_seed(0)
    with torch.inference_mode():
        output = loaded.model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=True,
            top_k=0,
            top_p=1.0,
            num_return_sequences=20,
            max_new_tokens=80,
            eos_token_id=stops,
            pad_token_id=loaded.tokenizer.pad_token_id,
            logits_processor=[constraint.processor(loaded.tokenizer, stops)],
        )
    answers = [row[prompt.shape[1] :].tolist() for row in output]  # (20, <= 80) each
    assert all(stops.count(row[-1]) or row.count(loaded.tokenizer.pad_token_id) for row in answers)
    texts = [loaded.tokenizer.decode(row, skip_special_tokens=True) for row in answers]
    assert len(set(texts)) > 10  # sampled: different answers
    for text in texts:
        jsonschema.validate(json.loads(text), WEATHER)


def test_a_named_call_is_forced_between_its_prefix_and_suffix(loaded):
    constraint = call_constraint(TOOLS, "get_weather", prefix="<tool_call>\n", suffix="\n</tool_call>")
    finish = _answer(loaded, constraint, temperature=0)
    assert finish.reason == "stop", finish
    assert finish.text.startswith("<tool_call>\n") and finish.text.endswith("\n</tool_call>")
    call = json.loads(finish.text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))
    assert call["name"] == "get_weather"
    jsonschema.validate(call["arguments"], WEATHER)


def test_any_call_names_one_of_the_tools(loaded):
    finish = _answer(loaded, call_constraint(TOOLS), seed=3)
    assert finish.reason == "stop", finish
    call = json.loads(finish.text)
    jsonschema.validate(call, call_schema(TOOLS))
    assert call["name"] in {"get_weather", "get_time"}


def test_an_answer_cut_before_the_json_closes_ends_with_length(loaded):
    finish = _answer(loaded, call_constraint(TOOLS, "get_weather"), max_new_tokens=6)
    assert finish.reason == "length" and finish.completion_tokens == 6
    with pytest.raises(json.JSONDecodeError):
        json.loads(finish.text)


def test_schemas_that_cannot_compile_are_refused_with_their_field():
    bad = {"type": "integer", "minimum": 5, "maximum": 1}
    tools = [TOOLS[0], {"type": "function", "function": {"name": "f", "parameters": bad}}]
    with pytest.raises(SchemaNotSupported) as refused:
        call_schema(tools)
    assert refused.value.code == "schema_not_supported"
    assert refused.value.fields == ("tools[1].function.parameters",)
    assert "minimum" in str(refused.value)
    response_format = {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "(?<=a)b"}}}
    with pytest.raises(SchemaNotSupported) as refused:
        response_schema(response_format)
    assert refused.value.fields == ("response_format.json_schema",) and refused.value.status == 400


def test_schema_helpers():
    assert response_schema({"type": "text"}) is None and response_schema(None) is None
    assert response_schema({"type": "json_object"}) == JSON_OBJECT
    assert call_schema(TOOLS, "get_time")["properties"]["name"] == {"const": "get_time"}
    assert [c["properties"]["name"]["const"] for c in call_schema(TOOLS)["anyOf"]] == ["get_weather", "get_time"]
    with pytest.raises(Refusal) as refused:
        call_schema(TOOLS, "nope")
    assert refused.value.fields == ("tool_choice",)
