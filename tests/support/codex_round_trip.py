"""The Codex-style round trip through ``POST /v1/responses`` with the ``openai`` client, for the real
models' tests (a run in transformers, a GGUF export in llama.cpp): a question with a function tool,
the model's ``function_call`` (forced by ``tool_choice``: constrained decoding, so the call is made
and its arguments match the schema even for a model never trained on tools), the tool's result sent
back as a ``function_call_output`` item after the earlier items, and the final answer in words."""

from __future__ import annotations

import json
from typing import Any

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
QUESTION = [{"role": "user", "content": "What is the weather in Paris right now?"}]
RESULT = '{"city": "Paris", "temperature_c": 18, "sky": "clear"}'


def codex_round_trip(client: Any, model: str, tool_choice: Any, max_output_tokens: int = 48) -> tuple[Any, Any]:
    """Run the round trip against ``model`` (greedy) and assert each step: ``output[0]`` is a completed
    ``function_call`` of ``get_weather`` with JSON arguments valid against its schema; the second
    request (the question, that call item and its ``function_call_output``; ``tool_choice`` none, so
    the model answers the result in words) returns an ``output_text`` message. Returns (first, final)."""
    first = client.responses.create(
        model=model,
        input=QUESTION,
        tools=[WEATHER],
        tool_choice=tool_choice,
        temperature=0,
        max_output_tokens=max_output_tokens,
    )
    call = first.output[0]
    assert first.status == "completed" and call.type == "function_call", first.output
    assert call.name == "get_weather" and call.status == "completed" and call.call_id
    arguments = json.loads(call.arguments)
    assert set(arguments) == {"city"} and isinstance(arguments["city"], str) and len(arguments["city"]) <= 40
    back = [
        *QUESTION,
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": RESULT},
    ]
    final = client.responses.create(
        model=model, input=back, tools=[WEATHER], tool_choice="none", temperature=0, max_output_tokens=max_output_tokens
    )
    message = final.output[0]
    assert [item.type for item in final.output] == ["message"] and message.role == "assistant", final.output
    assert message.content[0].type == "output_text" and final.output_text.strip()
    assert final.usage.input_tokens > first.usage.input_tokens  # the call and its result reached the model
    return first, final
