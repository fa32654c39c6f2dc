"""The Chat tab's Tools box: OpenAI function definitions pasted (or a ready example), a tool choice,
and the model's calls shown as calls in the chat; the user types each tool's result, which goes back
as a ``tool`` turn. The studio never runs a tool itself.

The box is checked by the rules of ``POST /v1/chat/completions`` (``tools.definitions.tool_list``;
a forced call's schema compiled by ``tools.constrain.call_schema``), its errors naming the box by
its label. In the chat a call is an assistant message titled ``CALL_TITLE`` whose text is
``name({"arguments": ...})`` and whose metadata ``id`` is the call's id; a result is a user message
titled ``RESULT_TITLE`` with the id of the call it answers. ``add_turn`` reads them back into our
canonical conversation (``tools.render``: Hermes blocks after the assistant's text, results in
``<tool_response>``), which the engine renders with the model's chat template, as the API does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

import gradio as gr

from trainer_core.refusals import Refusal
from trainer_core.serving.schemas import MAX_MESSAGE_CHARS, ChatMessage
from trainer_core.tools.definitions import TOOL_CHOICES, ToolsError, parsed_arguments, tool_list
from trainer_core.tools.render import call_text, wrapped_result
from ui.refused import Refused

TOOLS_LABEL = "Tools"
EXAMPLES_LABEL = "Ready examples"
CHOICE_LABEL = "Tool choice"
RESULT_LABEL = "Tool result"
BASE_RESULT_LABEL = "Tool result (base)"
CALL_TITLE = "🔧 Tool call"
RESULT_TITLE = "↩️ Tool result"
WAITING = "waiting for its result"  # the call's note (metadata ``log``) until a result answers it
CODE = "invalid_tools"  # the code of the box's refusals


def _function(name: str, description: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict:
    """A bare function object (``{"name", "description", "parameters"}``) of an example."""
    parameters = {"type": "object", "properties": properties} | ({"required": list(required)} if required else {})
    return {"name": name, "description": description, "parameters": parameters}


def _typed(kind: str, description: str) -> dict[str, str]:
    return {"type": kind, "description": description}


_WEATHER = _function(
    "get_weather",
    "The current weather in a city",
    {
        "city": _typed("string", "The city's name, e.g. Paris"),
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    ("city",),
)
_GLAIVE = [  # bare function objects, as the rows of glaive_toolcall_en_demo.json write them
    _function(
        "calculate_bmi",
        "Calculate body mass index",
        {
            "weight": _typed("number", "The weight of the person in kilograms"),
            "height": _typed("number", "The height of the person in meters"),
        },
        ("weight", "height"),
    ),
    _function(
        "convert_currency",
        "Convert currency from one type to another",
        {
            "amount": _typed("number", "The amount to convert"),
            "from_currency": _typed("string", "The currency to convert from"),
            "to_currency": _typed("string", "The currency to convert to"),
        },
        ("amount", "from_currency", "to_currency"),
    ),
]
_LIGHT = _function(
    "set_light",
    "Switch a room's light on or off",
    {"room": {"type": "string", "enum": ["kitchen", "living room", "bedroom"]}, "on": {"type": "boolean"}},
    ("room", "on"),
)
EXAMPLES = {  # OpenAI's wrapped form, except the glaive demo's
    "Weather: get_weather": [{"type": "function", "function": _WEATHER}],
    "glaive demo: calculate_bmi, convert_currency": _GLAIVE,
    "Home: set_light, get_time": [
        {"type": "function", "function": _LIGHT},
        {"type": "function", "function": _function("get_time", "The time now", {})},
    ],
}


@dataclass(frozen=True)
class ToolSettings:
    """The box's tools (``tool_list`` form; none: a plain chat) and its tool choice."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    choice: str = "auto"

    def request(self, after_results: bool = False) -> dict[str, Any]:
        """``ChatEngine.stream``'s keyword arguments: none without tools. The answer to tool results
        (``after_results``) is free (``auto``) when the choice is ``required``: that choice forces
        the answer to each message to be a call, not every answer after it."""
        if not self.tools:
            return {}
        choice = "auto" if after_results and self.choice == "required" else self.choice
        return {"tools": self.tools, "tool_choice": choice}


def checked(text: Any, choice: Any = "auto") -> ToolSettings:
    """The box's text and tool choice checked as the API checks ``tools`` and ``tool_choice``;
    Refused naming the box (``Tools[1].function.name: ...``) otherwise."""
    from trainer_core.tools.constrain import call_schema

    if choice not in TOOL_CHOICES:
        raise Refused(f"{CHOICE_LABEL}: choose one of {', '.join(TOOL_CHOICES)}", fields=("tool_choice",), code=CODE)
    try:
        tools = tool_list(text if isinstance(text, str) else "", TOOLS_LABEL)
    except ToolsError as exc:
        raise Refused(str(exc), fields=("tools",), code=CODE) from None
    if tools and choice == "required":
        try:
            call_schema(tools, None)
        except Refusal as exc:
            raise Refused(f"{TOOLS_LABEL}: {exc}", fields=("tools",), code=exc.code) from None
    return ToolSettings(tools, choice)


def summary(text: Any) -> str:
    """The line under the box: the functions it defines, or why it cannot be used."""
    try:
        tools = tool_list(text if isinstance(text, str) else "", TOOLS_LABEL)
    except ToolsError as exc:
        return f"**Not usable:** {exc}"
    if not tools:
        return "No tools: a plain chat."
    names = ", ".join(f"`{tool['function']['name']}`" for tool in tools)
    return f"{len(tools)} function{'s' if len(tools) > 1 else ''}: {names}."


def example(name: Any) -> Any:
    """The box's text for the ready example ``name`` (its JSON, indented); unchanged for none."""
    if name not in EXAMPLES:
        return gr.skip()
    return json.dumps(EXAMPLES[name], indent=2, ensure_ascii=False)


# ----- the chat's messages -----
def content_text(content: Any) -> str:
    """A chat message's content (a string or Gradio's list of text parts) as plain text."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else str(content or "")


def _text(message: dict[str, Any]) -> str:
    return content_text(message.get("content"))


def _title(message: dict[str, Any]) -> Optional[str]:
    metadata = message.get("metadata")
    return metadata.get("title") if isinstance(metadata, dict) else None


def call_message(call: dict[str, Any]) -> dict[str, Any]:
    """One call (OpenAI ``tool_calls`` shape) as the chat shows it: ``name({...})``, waiting."""
    function = call["function"]
    shown = f"{function['name']}({function['arguments']})"
    return {"role": "assistant", "content": shown, "metadata": {"title": CALL_TITLE, "id": call["id"], "log": WAITING}}


def show_calls(history: list[dict[str, Any]], calls: Optional[list[dict[str, Any]]]) -> None:
    """The answer's ``calls`` shown after its text, in place: the last (assistant) message stays
    when it has text, and each call follows as its own message."""
    if not calls:
        return
    if not _text(history[-1]).strip():
        history.pop()
    history.extend(call_message(call) for call in calls)


def _call(message: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(id, name, arguments) of a call message; Refused when its text is not ``name({...})``."""
    text = _text(message).strip()
    name, opened, rest = text.partition("(")
    try:
        if not opened or not rest.endswith(")"):
            raise ToolsError("call", "not name({...})")
        arguments = parsed_arguments(rest[:-1], "call")
    except ToolsError:
        raise Refused(f"Chat: a tool call reads {text[:80]!r}, not name({{...}}); press Clear") from None
    return str(message["metadata"].get("id", "")), name, arguments


def pending(history: Optional[list[dict[str, Any]]]) -> list[tuple[str, str]]:
    """(id, name) of the calls in ``history`` that no result answers yet, oldest first."""
    calls, answered = [], set()
    for message in history or []:
        if _title(message) == CALL_TITLE:
            calls.append((str(message["metadata"].get("id", "")), _text(message).partition("(")[0].strip()))
        elif _title(message) == RESULT_TITLE:
            answered.add(str(message["metadata"].get("id", "")))
    return [call for call in calls if call[0] not in answered]


def answered(history: list[dict[str, Any]], result: str) -> list[dict[str, Any]]:
    """``history`` with ``result`` answering its oldest waiting call (that call's note dropped)."""
    call_id, name = pending(history)[0]
    out = []
    for message in history:
        if _title(message) == CALL_TITLE and str(message["metadata"].get("id", "")) == call_id:
            message = {**message, "metadata": {"title": CALL_TITLE, "id": call_id}}
        out.append(message)
    return [*out, {"role": "user", "content": result, "metadata": {"title": RESULT_TITLE, "id": call_id, "log": name}}]


def add_turn(turns: list[ChatMessage], message: dict[str, Any]) -> bool:
    """Add chat ``message`` to the canonical ``turns`` when it is a call (a Hermes block after the
    assistant's text: one turn for an answer's text and calls) or a tool's result (a ``tool`` turn);
    False for any other message (added by the caller)."""
    title = _title(message)
    if title == RESULT_TITLE:
        turns.append(ChatMessage(role="tool", content=wrapped_result(_text(message))))
        return True
    if title != CALL_TITLE:
        return False
    _, name, arguments = _call(message)
    block = call_text(name, arguments)
    if turns and turns[-1].role == "assistant":
        text = turns[-1].content.strip()
        joined = f"{text}\n{block}" if text else block
        turns[-1] = turns[-1].model_copy(update={"content": joined})
    else:
        turns.append(ChatMessage(role="assistant", content=block))
    return True


def for_message(settings: ToolSettings, history: Any, base_history: Any) -> ToolSettings:
    """``settings`` for a new message; Refused naming the Message box while a call of either
    conversation waits for its result (a tool's result must come first)."""
    waiting = pending(history) or pending(base_history)
    if waiting:
        raise Refused(
            f"Message: the model called {waiting[0][1]} and waits for its result: type it in {RESULT_LABEL} and "
            "press Send tool result (or Clear to start over)",
            fields=("message",),
            code="tool_result_missing",
        )
    return settings


def results_for(history: Any, base_history: Any, result: Any, base_result: Any) -> tuple[Optional[str], Optional[str]]:
    """(the result for the tuned side's oldest waiting call, the base side's), None for a side with
    no call waiting. The base side takes ``base_result``, or ``result`` when that box is empty.
    Refused naming the box when no call waits, or a waiting call has no result (or one too long)."""
    tuned, base = pending(history), pending(base_history)
    if not tuned and not base:
        raise Refused(
            f"{RESULT_LABEL}: no tool call waits for a result: set {TOOLS_LABEL} and send a message; the model's "
            "calls are shown in the chat",
            fields=("tool_result",),
            code="no_tool_call",
        )
    text = result.strip() if isinstance(result, str) else ""
    base_text = (base_result.strip() if isinstance(base_result, str) else "") or text
    for label, waiting, given in ((RESULT_LABEL, tuned, text), (BASE_RESULT_LABEL, base, base_text)):
        if waiting and not given:
            also = f" (or one in {RESULT_LABEL} for both)" if label == BASE_RESULT_LABEL else ""
            raise Refused(
                f"{label}: type the result of {waiting[0][1]} as the tool would return it{also}",
                fields=("tool_result",),
                code="tool_result_missing",
            )
        if waiting and len(given) > MAX_MESSAGE_CHARS:
            raise Refused(f"{label}: {len(given)} characters, at most {MAX_MESSAGE_CHARS}", fields=("tool_result",))
    return (text if tuned else None), (base_text if base else None)
