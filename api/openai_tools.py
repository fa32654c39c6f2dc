"""Function tools on ``POST /v1/chat/completions``: the request's ``tools``, ``tool_choice`` and tool
messages turned into our canonical conversation, and the answer's calls into OpenAI's shapes.

In: ``tools`` checked and normalised by ``tools.definitions.tool_list`` (a bad one is a 400 naming
``tools[i]...``); ``tool_choice`` ``auto`` (the default with tools), ``none`` (the tools are shown,
no call is read), ``required`` (one call of some function) or ``{"type": "function", "function":
{"name": ...}}`` (one call of that one): the forced call is written by constrained decoding
(``serving.constraints``), so its arguments always parse and match the function's schema; its schema
is compiled here first (``tools.constrain.call_schema``: a 400 ``schema_not_supported`` naming
``tools[i].function.parameters``). ``response_format`` (``json_object`` / ``json_schema``) likewise
(``format_settings``). An assistant message's ``tool_calls`` become Hermes blocks after its
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
from trainer_core.refusals import Refusal
from trainer_core.tools.definitions import TOOL_CHOICES, ToolsError, parsed_arguments, tool_list
from trainer_core.tools.render import call_text


def _refused(exc: Refusal) -> OpenAIError:
    """A constraint's refusal as a 400 naming its first field, with its code."""
    return OpenAIError(400, str(exc), param=exc.fields[0] if exc.fields else None, code=exc.code)


def request_tools(
    tools: Optional[list[Any]], tool_choice: Union[str, dict, None]
) -> tuple[list[dict], Union[str, dict[str, Any]]]:
    """(``tool_list`` form of ``tools``, the tool choice: ``auto`` | ``none`` | ``required`` or
    ``{"type": "function", "function": {"name"}}``); OpenAIError 400 naming the field of a bad tool
    (``tools[1].function.parameters``), a ``tool_choice`` that is none of these or names no function
    of ``tools``, or a forced call's schema that cannot be compiled."""
    from trainer_core.tools.constrain import call_schema

    try:
        checked = tool_list(tools or [], "tools")
    except ToolsError as exc:
        raise OpenAIError(400, str(exc), param=exc.where) from None
    if tool_choice is None:
        return checked, "auto" if checked else "none"
    name = _named_choice(tool_choice)
    if tool_choice not in TOOL_CHOICES and name is None:
        raise OpenAIError(
            400,
            'tool_choice: give "auto", "none", "required" or {"type": "function", "function": {"name": ...}}',
            param="tool_choice",
        )
    if tool_choice == "required" or name is not None:
        try:
            call_schema(checked, name)
        except Refusal as exc:
            raise _refused(exc) from None
        return checked, tool_choice if name is None else {"type": "function", "function": {"name": name}}
    return checked, tool_choice


def _named_choice(tool_choice: Any) -> Optional[str]:
    """The function a ``tool_choice`` object names (chat's ``{"type": "function", "function":
    {"name"}}`` or the Responses API's flat ``{"type": "function", "name"}``), else None."""
    if not isinstance(tool_choice, dict) or tool_choice.get("type") != "function":
        return None
    function = tool_choice.get("function") if isinstance(tool_choice.get("function"), dict) else tool_choice
    name = function.get("name")
    return name if isinstance(name, str) and name else None


def format_settings(response_format: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """``response_format`` checked (``tools.constrain.response_schema``: text, json_object or
    json_schema whose schema compiles), or None for free text; OpenAIError 400 naming
    ``response_format`` (or ``response_format.json_schema``) otherwise."""
    from trainer_core.tools.constrain import response_schema
    from trainer_core.tools.json_schema import schema_problem

    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise OpenAIError(
            400, 'response_format: give {"type": "json_object"} or a json_schema', param="response_format"
        )
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema", {"type": "object"})
        problem = schema_problem(schema)
        if problem is not None:
            raise OpenAIError(400, f"response_format.json_schema: {problem}", param="response_format.json_schema")
    try:
        return None if response_schema(response_format) is None else response_format
    except Refusal as exc:
        raise _refused(exc) from None


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
