"""The request of ``POST /v1/responses`` (OpenAI's Responses API) and its mapping to the chat's.

``instructions`` becomes a system message; ``input`` (a text, or a list of items: messages with text
parts, ``function_call`` and ``function_call_output``) becomes the chat's ``RequestMessage`` list, so
``api.openai_messages.chat_messages`` renders it exactly as ``/v1/chat/completions`` would: calls in
a row make one assistant message, each output the ``tool`` message of the call its ``call_id`` names.
Function ``tools`` (flat: ``{"type": "function", "name", "parameters"}``) and ``tool_choice``
(``{"type": "function", "name"}``) take the chat's form and ``api.openai_tools.request_tools``'s
checks. ``text.format`` ``json_object`` / ``json_schema`` becomes the chat's ``response_format`` (the
same checks and constrained decoding). Built-in tools and ``previous_response_id`` are refused;
``store`` is accepted and nothing is stored. Every refusal is a 400 naming the Responses field
(``input[2].call_id``, ``tools[0].type``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Optional, Union

from pydantic import Field

from api.openai_errors import OpenAIError
from api.openai_messages import RequestMessage, chat_messages
from api.openai_schemas import MAX_MESSAGES, SamplingRequest
from api.openai_tools import format_settings, request_tools
from trainer_core.serving.schemas import ChatMessage, GenerationSettings
from trainer_core.tools.definitions import ToolsError, parsed_arguments
from trainer_core.vocabulary import OptionalWholeNumber

ROLES = ("user", "system", "developer", "assistant")
TEXT_PARTS = ("input_text", "output_text", "text")
MESSAGES_PARAM = re.compile(r"^messages\[(\d+)\]")


class ResponsesRequest(SamplingRequest):
    """``POST /v1/responses``; fields we do not know (``reasoning``, ``include``, ``metadata``, ...) are
    ignored, as OpenAI clients expect."""

    instructions: Optional[str] = Field(None, description="A system message put before `input`.")
    input: Union[str, list[Any]] = Field(description="A text, or items: messages, function_call, function_call_output.")
    max_output_tokens: OptionalWholeNumber = Field(None, description="Longest answer in tokens (max_new_tokens).")
    tools: Optional[list[Any]] = Field(None, description="Function tools (flat Responses form); built-in tools: 400.")
    tool_choice: Union[str, dict[str, Any], None] = Field(None, description="As on /v1/chat/completions.")
    parallel_tool_calls: Optional[bool] = Field(None, description="false: only the answer's first call is kept.")
    store: Optional[bool] = Field(None, description="Accepted; nothing is ever stored (send the whole input).")
    previous_response_id: Optional[str] = Field(None, description="Refused: nothing is stored; send the whole input.")
    text: Optional[dict[str, Any]] = Field(
        None, description="`format`: text, json_object or json_schema (`name`, `schema`, `strict`), as response_format."
    )

    def check_supported(self) -> None:
        """Refuse what we would otherwise get silently wrong (400 naming the field)."""
        super().check_supported()
        if self.previous_response_id:
            raise OpenAIError(
                400,
                "previous_response_id: this server stores no responses; send the whole conversation in input "
                "(the earlier items, function_call and function_call_output included) and leave it out",
                param="previous_response_id",
            )

    def generation_settings(self) -> GenerationSettings:
        """Our ``GenerationSettings`` (``max_output_tokens`` is ``max_new_tokens``); 400 naming the field."""
        try:
            return SamplingRequest.generation_settings(self.model_copy(update={"max_tokens": self.max_output_tokens}))
        except OpenAIError as exc:
            if exc.param == "max_tokens":
                exc.param, exc.message = "max_output_tokens", exc.message.replace("max_tokens", "max_output_tokens")
            raise

    def format_settings(self) -> Optional[dict[str, Any]]:
        """``text.format`` as the chat's ``response_format`` (``json_schema``'s flat ``name``, ``schema``
        and ``strict`` under ``json_schema``), checked by ``api.openai_tools.format_settings``; None for
        text. 400 naming ``text.format`` (``text.format.schema`` for a schema that cannot be used)."""
        text_format = (self.text or {}).get("format")
        if text_format is None:
            return None
        if not isinstance(text_format, dict):
            raise OpenAIError(
                400, 'text.format: give {"type": "json_schema", "name": ..., "schema": {...}}', param="text.format"
            )
        kind = text_format.get("type", "text")
        keys = ("name", "description", "schema", "strict")
        shape = {"type": kind} | (
            {"json_schema": {key: text_format[key] for key in keys if key in text_format}}
            if kind == "json_schema"
            else {}
        )
        try:
            return format_settings(shape)
        except OpenAIError as exc:
            for chat, ours in (
                ("response_format.json_schema", "text.format.schema"),
                ("response_format", "text.format"),
            ):
                exc.param, exc.message = (exc.param or "").replace(chat, ours) or None, exc.message.replace(chat, ours)
            raise

    def tool_settings(self) -> tuple[list[dict[str, Any]], str]:
        """(the tools in ``tool_list`` form, the tool choice); 400 naming ``tools[i]...`` in the flat form."""
        tools = [_chat_tool(i, tool) for i, tool in enumerate(self.tools or [])]
        try:
            return request_tools(tools, _chat_choice(self.tool_choice))
        except OpenAIError as exc:
            flat = re.compile(r"(tools\[\d+\])\.function\b")
            exc.param, exc.message = flat.sub(r"\1", exc.param or "") or None, flat.sub(r"\1", exc.message)
            raise

    def chat_messages(self, fetch: Optional[Callable[[str], str]] = None) -> list[ChatMessage]:
        """Our ``ChatMessage`` list: ``instructions``, then ``input``'s items (400 naming ``input[i]...``)."""
        requests, wheres = [], []
        if self.instructions is not None:
            requests.append(RequestMessage(role="system", content=self.instructions))
            wheres.append("instructions")
        items = [{"role": "user", "content": self.input}] if isinstance(self.input, str) else self.input
        if not items:
            raise OpenAIError(400, "input: give a text or at least one item", param="input")
        if len(items) > MAX_MESSAGES:
            raise OpenAIError(400, f"input: at most {MAX_MESSAGES} items", param="input")
        for request, where in input_messages(items, "input" if isinstance(self.input, str) else None):
            requests.append(request)
            wheres.append(where)
        try:
            return chat_messages(requests, fetch)
        except OpenAIError as exc:  # the chat's names (messages[k]...) as this request's
            found = MESSAGES_PARAM.match(exc.param or "")
            if found:  # a text field (instructions, a text input) is named itself, not its .content
                name = wheres[int(found.group(1))]
                chat = found.group(0) + (".content" if name in ("instructions", "input") else "")
                exc.param, exc.message = (exc.param or "").replace(chat, name, 1), exc.message.replace(chat, name, 1)
            raise


def _chat_tool(index: int, tool: Any) -> Any:
    """A flat Responses function tool in the chat's form (others are left for ``request_tools`` to
    refuse); 400 naming ``tools[i].type`` for a built-in tool."""
    if not isinstance(tool, dict):
        return tool
    kind = tool.get("type")
    if kind != "function":
        shown = repr(kind)[:40] if kind is not None else "none"
        raise OpenAIError(
            400,
            f"tools[{index}].type: {shown}: built-in tools (web_search, file_search, code_interpreter, computer_use, "
            '...) are not supported; this server serves function tools only ({"type": "function", "name": ...})',
            param=f"tools[{index}].type",
        )
    keys = ("name", "description", "parameters", "strict")
    return {"type": "function", "function": {key: tool[key] for key in keys if key in tool}}


def _chat_choice(choice: Union[str, dict[str, Any], None]) -> Union[str, dict[str, Any], None]:
    """``{"type": "function", "name": N}`` as the chat's ``{"type": "function", "function": {"name": N}}``;
    400 naming ``tool_choice`` for a built-in tool's or ``allowed_tools``."""
    if not isinstance(choice, dict):
        return choice
    if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
        raise OpenAIError(
            400, 'tool_choice: give auto, none, required or {"type": "function", "name": ...}', param="tool_choice"
        )
    return {"type": "function", "function": {"name": choice["name"]}}


def input_messages(items: list[Any], text_where: Optional[str] = None) -> list[tuple[RequestMessage, str]]:
    """The chat's messages of ``input``'s items, each with the item it came from (``input[i]``; all
    ``text_where`` for a text input): calls in a row join one assistant message (after its text when an
    assistant message precedes them), each ``function_call_output`` a ``tool`` message; 400 naming the
    item's field for a type, role, part or call that is not supported."""
    out: list[tuple[RequestMessage, str]] = []
    open_calls: list[str] = []  # the call ids of the last assistant message, while its outputs follow
    for i, item in enumerate(items):
        where = text_where or f"input[{i}]"
        if not isinstance(item, dict):
            raise OpenAIError(400, f"{where}: give an object (a message or a function call item)", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            out.append((RequestMessage(role=_role(item, where), content=_text(item.get("content"), where)), where))
            open_calls = []
        elif kind == "function_call":
            call = _call(item, where)
            last = out[-1][0] if out else None
            if last is not None and last.role == "assistant":
                last.tool_calls = [*(last.tool_calls or []), call]
            else:
                out.append((RequestMessage(role="assistant", content=None, tool_calls=[call]), where))
                open_calls = []
            open_calls.append(call["id"])
        elif kind == "function_call_output":
            call_id = _call_id(item, where, open_calls)
            output = _text(item.get("output"), where, "output")
            out.append((RequestMessage(role="tool", content=output, tool_call_id=call_id), where))
        else:
            raise OpenAIError(
                400,
                f"{where}.type: {repr(kind)[:40]}: give message, function_call or function_call_output",
                param=f"{where}.type",
            )
    return out


def _role(item: dict[str, Any], where: str) -> str:
    role = item.get("role")
    if role not in ROLES:
        raise OpenAIError(400, f"{where}.role: give user, system, developer or assistant", param=f"{where}.role")
    return role


def _text(content: Any, where: str, field: str = "content") -> str:
    """A content (or output) as one text: a string, or text parts joined; 400 naming the part otherwise."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise OpenAIError(400, f"{where}.{field}: give a text or a list of text parts", param=f"{where}.{field}")
    pieces = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in TEXT_PARTS or not isinstance(part.get("text"), str):
            spot = f"{where}.{field}[{j}]"
            raise OpenAIError(
                400, f'{spot}: only text parts ({{"type": "input_text", "text": ...}}) are supported', param=spot
            )
        pieces.append(part["text"])
    return "".join(pieces)


def _call(item: dict[str, Any], where: str) -> dict[str, Any]:
    """A ``function_call`` item as a chat ``tool_calls`` entry; 400 naming a missing or bad field."""
    for field in ("call_id", "name"):
        if not isinstance(item.get(field), str) or not item[field]:
            raise OpenAIError(400, f"{where}.{field}: required", param=f"{where}.{field}")
    try:
        parsed_arguments(item.get("arguments"), f"{where}.arguments")
    except ToolsError as exc:
        raise OpenAIError(400, str(exc), param=exc.where) from None
    function = {"name": item["name"], "arguments": item.get("arguments")}
    return {"id": item["call_id"], "type": "function", "function": function}


def _call_id(item: dict[str, Any], where: str, open_calls: list[str]) -> str:
    """The ``call_id`` of a ``function_call_output``: one of the calls just before it, else 400."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise OpenAIError(400, f"{where}.call_id: required", param=f"{where}.call_id")
    if call_id not in open_calls:
        raise OpenAIError(
            400,
            f"{where}.call_id: it names no function_call item before it (since the last message); send the "
            "function_call item with this call_id first",
            param=f"{where}.call_id",
        )
    return call_id
