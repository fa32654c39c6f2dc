"""Conversations with tools as the model's own chat template renders them, for training and serving.

Our canonical conversation (``data.formats``) keeps a call in the assistant's text as a Hermes block,
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` (several blocks: parallel calls),
and a tool's result as a ``tool`` turn wrapped in ``<tool_response>`` ... ``</tool_response>``; the
functions travel beside it as ``definitions.tool_list``'s list. ``template_conversation`` turns that
into what ``apply_chat_template`` takes:

- a template that renders tools (its text uses ``tools``, or it has a ``tool_use`` variant): the
  calls as structured ``tool_calls`` (``arguments`` a dict, as transformers' templates expect; ids of
  9 letters and digits, which Mistral's templates demand), results as ``tool`` messages with the
  ``tool_call_id`` and ``name`` of the call they answer, and ``tools=`` passed to the template;
- any other template: the documented fallback, ``tools_block`` (the functions as JSON lines in
  ``<tools>`` in the system message), the Hermes blocks left in the text, which the model then learns.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from trainer_core.tools.definitions import ToolsError, parsed_arguments

TOOL_CALL = ("<tool_call>\n", "\n</tool_call>")
TOOL_RESPONSE = ("<tool_response>\n", "\n</tool_response>")
FALLBACK_FORMAT = "hermes"  # the call format of the fallback, and of our canonical data
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def template_text(tokenizer: Any) -> str:
    """The tokenizer's chat template(s) as one text ('' when it has none)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    return "\n".join(template.values()) if isinstance(template, dict) else template


def supports_tools(tokenizer: Any) -> bool:
    """Whether the chat template renders a ``tools`` list (or has a ``tool_use`` variant)."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict) and "tool_use" in template:
        return True
    return re.search(r"\btools\b", template_text(tokenizer)) is not None


def tools_block(tools: list[dict[str, Any]]) -> str:
    """The fallback's system text for ``tools`` (``tool_list`` form): Hermes' layout, one JSON
    function object (``{"name", "description", "parameters"}``, as glaive / LLaMA-Factory rows write
    it, so such rows read as they were written) per line ('' without tools)."""
    if not tools:
        return ""
    lines = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
    return f"You have access to the following tools:\n<tools>\n{lines}\n</tools>"


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """One call as our canonical Hermes block."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{TOOL_CALL[0]}{body}{TOOL_CALL[1]}"


def split_calls(content: str, where: str = "content") -> tuple[str, list[dict[str, Any]]]:
    """An assistant text in canonical form as (the text before its first call, stripped; the calls
    as ``{"name", "arguments": dict}``). A text without ``<tool_call>`` blocks is ``(content, [])``.
    Raises ToolsError naming ``where`` for a block that is not ``{"name": ..., "arguments": {...}}``
    JSON (``parameters`` is accepted for ``arguments``, as Llama 3 writes it)."""
    blocks = list(_CALL.finditer(content))
    if not blocks:
        return content, []
    calls = []
    for i, block in enumerate(blocks):
        spot = f"{where}, call {i + 1}"
        try:
            call = json.loads(block.group(1))
        except json.JSONDecodeError as exc:
            raise ToolsError(spot, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ToolsError(spot, 'give {"name": ..., "arguments": {...}}')
        arguments = call.get("arguments", call.get("parameters"))
        calls.append({"name": call["name"], "arguments": parsed_arguments(arguments, f"{spot}, arguments")})
    return content[: blocks[0].start()].strip(), calls


def wrapped_result(text: str) -> str:
    """A tool's result as our canonical ``tool`` turn's text."""
    return f"{TOOL_RESPONSE[0]}{text}{TOOL_RESPONSE[1]}"


def unwrapped_result(content: str) -> str:
    """A tool turn's text without its ``<tool_response>`` wrapper."""
    text = content.strip()
    start, end = (part.strip() for part in TOOL_RESPONSE)
    if text.startswith(start) and text.endswith(end):
        return text[len(start) : len(text) - len(end)].strip()
    return content


def call_id(seed: str) -> str:
    """A stable id of 9 letters and digits for the call named by ``seed``."""
    digest = hashlib.sha1(seed.encode()).hexdigest()
    return "".join(c if i % 2 or c.isdigit() else c.upper() for i, c in enumerate(digest[:9]))


def template_conversation(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(messages, extra ``apply_chat_template`` keyword arguments) for canonical ``messages`` and
    ``tools`` (``tool_list`` form): the structured form where the template renders tools, else the
    fallback (see the module docstring). Raises ToolsError for a call block that is not valid."""
    has_calls = any(m["role"] == "tool" or "<tool_call>" in (m.get("content") or "") for m in messages)
    if not tools and not has_calls:
        return messages, {}
    if not supports_tools(tokenizer):
        return with_block(messages, tools_block(tools)), {}
    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (id, name) of calls not yet answered, oldest first
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            text, calls = split_calls(message["content"], f"turn {index + 1}")
            if calls:
                ids = [call_id(f"{index}:{n}:{c['name']}") for n, c in enumerate(calls)]
                pending = list(zip(ids, (c["name"] for c in calls)))
                tool_calls = [
                    {"id": i, "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for i, c in zip(ids, calls)
                ]
                out.append({"role": "assistant", "content": text, "tool_calls": tool_calls})
                continue
        elif message["role"] == "tool":
            answered, name = pending.pop(0) if pending else (call_id(f"{index}:result"), "")
            result = {"role": "tool", "content": unwrapped_result(message["content"]), "tool_call_id": answered}
            out.append(result | ({"name": name} if name else {}))
            continue
        out.append(dict(message))
    return out, ({"tools": tools} if tools else {})


def with_block(messages: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """``messages`` with ``block`` appended to the leading system message (one added if none), after
    a blank line; the same list for an empty ``block``."""
    if not block:
        return messages
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{block}"}, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]
