"""Tool-use rows in canonical form: the row's functions beside its messages, its calls and results checked.

A canonical conversation keeps its functions in the column ``tools`` (``TOOLS``): the JSON text of
``tools.definitions.tool_list``'s list, '' for a row without tools. The functions are not merged
into the system message when the data is read: ``tools.render.template_conversation`` writes them
when a row is rendered, natively (``apply_chat_template(..., tools=...)``) where the model's
template renders tools, else as the documented fallback block; ``conversation`` here is that one
path, shared by training, the check, the preview's token counts and evaluation.

Calls are the assistant's Hermes blocks (``render.call_text``): a ShareGPT ``function_call`` turn
is one, and so is each of an OpenAI assistant message's ``tool_calls`` (``arguments`` as JSON text
or an object; ``content`` may be null). A result is a ``tool`` turn (ShareGPT ``observation``).
What a user expects of such rows, and so what is refused (``check_calls``, naming the turn): a call
that is not ``{"name", "arguments"}`` JSON; a call to a function the row's tools do not define (a
row with tools: training would teach the model to call a function that does not exist); a tool
result that answers no call, answers an OpenAI ``tool_call_id`` no earlier call has, or answers
calls out of their order (the template pairs results with calls in order).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from trainer_core.data.errors import RowError
from trainer_core.data.template_fit import fit_conversation, template_fit
from trainer_core.tools.definitions import ToolsError, parsed_arguments, tool_list
from trainer_core.tools.render import (
    call_text,
    split_calls,
    supports_tools,
    template_conversation,
    tools_block,
    unwrapped_result,
    with_block,
)

TOOLS = "tools"  # the canonical column of a conversation's functions (JSON text, '' for none)
NATIVE, FALLBACK = "native", "fallback"  # how a template renders tools (``tool_format``)


def row_tools(value: Any) -> str:
    """A row's ``tools`` value (JSON text or a list, wrapped or bare) as the canonical column's text.
    RowError naming the field (``tools[1].function.name: ...``) for a value ``tool_list`` refuses."""
    try:
        tools = tool_list(value)
    except ToolsError as exc:
        raise RowError(f"field {exc}") from None
    return json.dumps(tools, ensure_ascii=False) if tools else ""


def loaded(text: Optional[str]) -> list[dict[str, Any]]:
    """The canonical column's text as the ``tool_list`` list ([] for '' or None)."""
    return json.loads(text) if text else []


def in_system(messages: list[dict[str, str]], tools: Optional[str]) -> list[dict[str, str]]:
    """``messages`` with the row's ``tools`` (the column's text) as the fallback block at the end of
    the system message: for rows rendered where no ``tools=`` reaches the template (TRL's preference
    trainers, a processor's media rows), as they were before the tools moved beside the messages."""
    return with_block(messages, tools_block(loaded(tools)))


def calls_content(turn: dict[str, Any], content: Optional[str], where: str) -> str:
    """The canonical text of an OpenAI assistant turn with ``tool_calls``: its text (``content``,
    None for null) and one Hermes block per call, separated by newlines. RowError naming ``where``
    and the call for a call that is not ``{"function": {"name", "arguments"}}`` or arguments that are
    not a JSON object."""
    calls = turn.get("tool_calls")
    if not isinstance(calls, list):
        raise RowError(f"{where}: 'tool_calls' is a {type(calls).__name__}: give a list of calls")
    blocks = [content.strip()] if content and content.strip() else []
    for number, call in enumerate(calls, start=1):
        spot = f"{where}, tool_calls[{number - 1}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RowError(f'{spot}: give {{"type": "function", "function": {{"name": ..., "arguments": ...}}}}')
        try:
            arguments = parsed_arguments(function.get("arguments"), f"{spot}.function.arguments")
        except ToolsError as exc:
            raise RowError(str(exc)) from None
        blocks.append(call_text(function["name"], arguments))
    if not blocks:
        raise RowError(f"{where}: 'tool_calls' is empty and there is no content: give a call or the answer")
    return "\n".join(blocks)


def check_calls(turns: list[Any], messages: list[dict[str, str]], tools: list[dict[str, Any]], field: str) -> None:
    """Refuse what the module docstring lists, naming ``field`` and the turn (1-based in ``turns``,
    the row's raw turns, which ``messages`` follows one to one after a leading system message)."""
    defined = {tool["function"]["name"] for tool in tools}
    offset = len(messages) - len(turns)  # a system message merged in front
    pending: list[Optional[str]] = []  # ids (None when the data gave none) of calls not yet answered
    for position, (turn, message) in enumerate(zip(turns, messages[offset:]), start=1):
        where = f"{field!r} turn {position}"
        if message["role"] == "assistant":
            try:
                _, calls = split_calls(message["content"], where)
            except ToolsError as exc:
                raise RowError(f'{exc}: write each call as {{"name": ..., "arguments": {{...}}}}') from None
            for call in calls:
                if defined and call["name"] not in defined:
                    raise RowError(
                        f"{where} calls {call['name']!r}, which the row's tools do not define "
                        f"({', '.join(sorted(defined))}): fix the call's name or the tools"
                    )
            ids = [c.get("id") for c in turn.get("tool_calls") or []] if isinstance(turn, dict) else []
            pending = (ids + [None] * len(calls))[: len(calls)] if calls else []
        elif message["role"] == "tool":
            answered = turn.get("tool_call_id") if isinstance(turn, dict) else None
            if not pending:
                raise RowError(f"{where} is a tool result that answers no call: put the assistant's call before it")
            if answered is not None and answered not in pending:
                raise RowError(
                    f"{where} answers tool_call_id {str(answered)[:40]!r}, which no earlier call has: "
                    "give it the id of the call it answers"
                )
            if answered is not None and answered != pending[0]:  # rendering pairs results with calls in order
                raise RowError(
                    f"{where} answers call {str(answered)[:40]!r} before call {str(pending[0])[:40]!r}: "
                    "give the results in the order of the calls"
                )
            pending.pop(0)


def tool_format(tokenizer: Any) -> str:
    """How ``tokenizer``'s chat template is given tools: NATIVE (``tools=``) or FALLBACK (the block)."""
    return NATIVE if supports_tools(tokenizer) else FALLBACK


def conversation(tokenizer: Any, messages: list[dict[str, str]], tools: Optional[str]) -> tuple[list, dict]:
    """(messages, extra ``apply_chat_template`` keyword arguments) for one canonical row: its tools
    and calls as the template takes them (``render.template_conversation``), then shaped to what the
    template accepts (``template_fit``). RowError for a call block that is not valid."""
    try:
        shaped, extra = template_conversation(tokenizer, messages, loaded(tools))
    except ToolsError as exc:
        raise RowError(str(exc)) from None
    return fit_conversation(shaped, template_fit(tokenizer)), extra


def shown_turn(message: dict[str, str]) -> tuple[str, str]:
    """(role, text) of a turn for people: calls as ``call NAME {arguments}`` lines after the text,
    a tool's result as ``result`` without its wrapper; other turns as they are."""
    if message["role"] == "tool":
        return "result", unwrapped_result(message["content"])
    if message["role"] != "assistant" or "<tool_call>" not in message["content"]:
        return message["role"], message["content"]
    try:
        text, calls = split_calls(message["content"])
    except ToolsError:
        return message["role"], message["content"]
    lines = [f"call {c['name']} {json.dumps(c['arguments'], ensure_ascii=False)}" for c in calls]
    return message["role"], "\n".join([text, *lines] if text else lines)


def shown_tools(tools: Optional[str]) -> Optional[tuple[str, str]]:
    """("tools", the function names) of a row with tools, for the preview; None without."""
    names = [tool["function"]["name"] for tool in loaded(tools)]
    return ("tools", ", ".join(names)) if names else None


@dataclass(frozen=True)
class ToolCounts:
    """What the rows hold of tools, for the check: ``rows`` in all, ``with_tools`` rows that define
    functions, ``with_calls`` rows with at least one call, ``calls`` in all, ``most_calls`` in one
    row, ``results`` tool results, and ``functions`` the names defined (sorted, each once)."""

    rows: int
    with_tools: int
    with_calls: int
    calls: int
    most_calls: int
    results: int
    functions: tuple[str, ...]


def tool_counts(conversations: list[list[dict[str, str]]], tools: list[Optional[str]]) -> ToolCounts:
    """``ToolCounts`` of canonical rows (``messages`` and their ``tools`` texts, one per row)."""
    per_row = [sum(m["content"].count("<tool_call>") for m in c if m["role"] == "assistant") for c in conversations]
    names = {tool["function"]["name"] for text in tools for tool in loaded(text)}
    return ToolCounts(
        rows=len(conversations),
        with_tools=sum(bool(text) for text in tools),
        with_calls=sum(n > 0 for n in per_row),
        calls=sum(per_row),
        most_calls=max(per_row, default=0),
        results=sum(m["role"] == "tool" for c in conversations for m in c),
        functions=tuple(sorted(names)),
    )


def trained_tool_format(rows: Any, tokenizer: Any) -> Optional[str]:
    """How canonical ``rows`` (a Dataset) were given their tools in training, for the run's record
    (``run.json`` ``tool_format``, so serving can prompt as the model learnt): NATIVE or FALLBACK,
    None when no row defines functions or calls one."""
    if "messages" not in rows.column_names or TOOLS not in rows.column_names:
        return None
    for batch in rows.select_columns(["messages", TOOLS]).iter(batch_size=1000):  # never all rows at once
        counts = tool_counts(batch["messages"], batch[TOOLS])
        if counts.with_tools or counts.calls:
            return tool_format(tokenizer)
    return None
