"""Function tools on ``POST /v1/chat/completions``: the request's ``tools``, ``tool_choice`` and tool
messages turned into our canonical conversation, and the answer's calls into OpenAI's shapes.

In: ``tools`` checked and normalised by ``tools.definitions.tool_list`` (a bad one is a 400 naming
``tools[i]...``); ``tool_choice`` ``auto`` (the default with tools) or ``none`` (the tools are shown,
no call is read); ``required`` and a named function are refused for now (``tool_choice_not_supported``:
they need constrained decoding). An assistant message's ``tool_calls`` become Hermes blocks after its
text (``tools.render.call_text``), and a ``tool`` message the ``<tool_response>`` turn of the call its
``tool_call_id`` names, results put in the order of their calls, so serving renders a conversation
exactly as training renders its rows (``tools.render.template_conversation``).

Out: the calls the worker read (``tools.parse``) as ``message.tool_calls`` with ``finish_reason``
``tool_calls`` (content null when there is no text), and in a stream as OpenAI sends them: per call a
chunk with its index, id, type, name and ``arguments`` "", then one with the arguments.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from api.openai_errors import OpenAIError
from trainer_core.tools.definitions import ToolsError, parsed_arguments, tool_list
from trainer_core.tools.render import TOOL_RESPONSE, call_text

CHOICES = ("auto", "none")
NOT_YET = (
    "tool_choice: 'required' and a named function are enforced by constrained decoding, which this server "
    "does not have yet; send 'auto' (or leave it out) and read message.tool_calls"
)


def request_tools(tools: Optional[list[Any]], tool_choice: Union[str, dict, None]) -> tuple[list[dict], str]:
    """(``tool_list`` form of ``tools``, the tool choice ``auto`` | ``none``); OpenAIError 400 naming
    the field of a bad tool (``tools[1].function.parameters``) or an unsupported ``tool_choice``."""
    try:
        checked = tool_list(tools or [], "tools")
    except ToolsError as exc:
        raise OpenAIError(400, str(exc), param=exc.where) from None
    if tool_choice is None:
        return checked, "auto" if checked else "none"
    if tool_choice == "required" or isinstance(tool_choice, dict):
        raise OpenAIError(400, NOT_YET, param="tool_choice", code="tool_choice_not_supported")
    if tool_choice not in CHOICES:
        raise OpenAIError(400, "tool_choice: give 'auto' or 'none'", param="tool_choice")
    return checked, tool_choice


def assistant_text(where: str, text: str, tool_calls: list[Any]) -> tuple[str, list[tuple[str, str]]]:
    """An assistant message's canonical text (``text``, then a Hermes block per call) and its calls'
    (id, name); OpenAIError 400 naming ``where.tool_calls[j]...`` for a call that is not a function
    with a name and JSON-object arguments."""
    blocks, ids = [], []
    for j, call in enumerate(tool_calls):
        spot = f"{where}.tool_calls[{j}]"
        if not isinstance(call, dict) or call.get("type", "function") != "function":
            raise OpenAIError(400, f"{spot}: only function calls are supported", param=spot)
        function = call.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise OpenAIError(400, f"{spot}.function.name: required", param=f"{spot}.function.name")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise OpenAIError(400, f"{spot}.id: required (the tool message answers it)", param=f"{spot}.id")
        try:
            arguments = parsed_arguments(function.get("arguments"), f"{spot}.function.arguments")
        except ToolsError as exc:
            raise OpenAIError(400, str(exc), param=exc.where) from None
        blocks.append(call_text(name, arguments))
        ids.append((call_id, name))
    return "\n".join([text, *blocks] if text else blocks), ids


def tool_result(where: str, tool_call_id: Optional[str], open_calls: list[tuple[str, str]]) -> int:
    """The place among ``open_calls`` (id, name) of the call a tool message answers; OpenAIError 400
    naming ``where.tool_call_id`` when it is missing or answers no call of the assistant message before."""
    ids = [call_id for call_id, _ in open_calls]
    if not tool_call_id:
        raise OpenAIError(400, f"{where}.tool_call_id: required", param=f"{where}.tool_call_id")
    if tool_call_id not in ids:
        raise OpenAIError(
            400,
            f"{where}.tool_call_id: it names no call of the assistant message before it; give the id of one of "
            "its tool_calls",
            param=f"{where}.tool_call_id",
        )
    return ids.index(tool_call_id)


def wrapped_result(text: str) -> str:
    """A tool's result as our canonical ``tool`` turn's text."""
    return f"{TOOL_RESPONSE[0]}{text}{TOOL_RESPONSE[1]}"


def answer_parts(
    text: str, calls: Optional[list[dict[str, Any]]], parallel: bool
) -> tuple[Optional[str], Optional[list[dict[str, Any]]]]:
    """(content, tool_calls) of an answer: without calls the text as it is; with calls the text
    stripped (None when empty) and the calls (only the first where ``parallel`` is false)."""
    if not calls:
        return text, None
    return (text.strip() or None), (calls if parallel else calls[:1])


def call_deltas(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``delta`` objects of a stream's calls, as OpenAI sends them: per call the head (index, id,
    type, name, arguments "") and then its arguments."""
    deltas = []
    for index, call in enumerate(calls):
        head = {"index": index, "id": call["id"], "type": "function"}
        function = {"name": call["function"]["name"], "arguments": ""}
        deltas.append({"tool_calls": [head | {"function": function}]})
        deltas.append({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]})
    return deltas
