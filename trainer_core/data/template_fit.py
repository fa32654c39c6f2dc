"""Conversations shaped to what a model's chat template accepts.

Some families' templates refuse conversations that others take: Gemma's raises "System role not
supported" for a system message, and Gemma's and Mistral's (v0.1-v0.3) raise "Conversation roles
must alternate user/assistant/user/assistant/..." for two user (or two assistant) turns in a row.
Rather than fail a run on a Jinja error, the data is shaped to fit, as these templates' authors
ask users to do: the system text goes at the start of the first user turn (separated by a blank
line), and consecutive turns of one role become one turn (their texts joined by a blank line).
What a template accepts is found by rendering three small probe conversations, not from a list of
families; the check says how many rows were shaped and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

SEPARATOR = "\n\n"
_PROBE_SYSTEM = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": "a"},
]
_PROBE_TWO_USERS = [
    {"role": "user", "content": "u"},
    {"role": "user", "content": "v"},
    {"role": "assistant", "content": "a"},
]
_PROBE_PLAIN = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
_PROBE_TOOL = [*_PROBE_PLAIN, {"role": "tool", "content": "t"}, {"role": "assistant", "content": "b"}]


@dataclass(frozen=True)
class TemplateFit:
    """What a chat template refuses: ``system`` (a system message), ``repeats`` (two turns of one
    role in a row) and ``tool`` (a ``tool`` message without a call id: a tool's result in the tools
    fallback, ``tools.render``). All False for templates that take any conversation (ChatML, Llama 3)."""

    system: bool = False
    repeats: bool = False
    tool: bool = False

    @property
    def shapes(self) -> bool:
        return self.system or self.repeats or self.tool


_FITS: dict[str, TemplateFit] = {}


def _renders(tokenizer: Any, messages: list[dict[str, str]]) -> bool:
    from jinja2 import TemplateError

    try:
        tokenizer.apply_chat_template(messages, tokenize=False)
        return True
    except (TemplateError, ValueError, TypeError):
        return False


def template_fit(tokenizer: Any) -> TemplateFit:
    """What ``tokenizer``'s chat template refuses (probed once per template text). A template that
    fails on a plain user/assistant pair refuses nothing here: its own error is shown as it is."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else repr(tokenizer.chat_template)
    if template not in _FITS:
        if not _renders(tokenizer, _PROBE_PLAIN):
            _FITS[template] = TemplateFit()
        else:
            _FITS[template] = TemplateFit(
                system=not _renders(tokenizer, _PROBE_SYSTEM),
                repeats=not _renders(tokenizer, _PROBE_TWO_USERS),
                tool=not _renders(tokenizer, _PROBE_TOOL),
            )
    return _FITS[template]


def fit_conversation(messages: list[dict[str, Any]], fit: TemplateFit) -> list[dict[str, Any]]:
    """``messages`` shaped for a template that refuses what ``fit`` says (see the module
    docstring); the same list when nothing needs to change. Text contents only are joined;
    a message with other content (parts), or with structured calls or a call id, is left as it is."""
    if not fit.shapes:
        return messages
    shaped = [dict(m) for m in messages]
    if fit.tool:  # a tool's result (still in its <tool_response> wrapper) is a user turn, as Qwen's template has it
        shaped = [{**m, "role": "user"} if _bare_tool(m) else m for m in shaped]
    if fit.system and shaped and shaped[0].get("role") == "system":
        system = shaped.pop(0)
        first_user = next((m for m in shaped if m.get("role") == "user"), None)
        if first_user is not None and isinstance(first_user.get("content"), str):
            first_user["content"] = f"{system.get('content') or ''}{SEPARATOR}{first_user['content']}"
        else:
            shaped.insert(0, {"role": "user", "content": system.get("content") or ""})
    if fit.repeats:
        merged: list[dict[str, Any]] = []
        for message in shaped:
            last = merged[-1] if merged else None
            texts = (
                last is not None
                and isinstance(last.get("content"), str)
                and isinstance(message.get("content"), str)
                and not _structured(last)
                and not _structured(message)
            )
            if last is not None and last.get("role") == message.get("role") and texts:
                last["content"] = f"{last['content']}{SEPARATOR}{message['content']}"
            else:
                merged.append(message)
        shaped = merged
    return shaped


def _structured(message: dict[str, Any]) -> bool:
    """A call or a result in a template's own form (``tools.render``): merging would lose its ids."""
    return bool(message.get("tool_calls") or message.get("tool_call_id"))


def _bare_tool(message: dict[str, Any]) -> bool:
    """A tool result without a call id (the tools fallback's form)."""
    return message.get("role") == "tool" and not message.get("tool_call_id")


def shaped_count(conversations: list[list[dict[str, Any]]], fit: TemplateFit) -> tuple[int, int, int]:
    """(rows whose system text moves, rows whose repeated turns merge, rows whose tool results
    become user turns) under ``fit``."""
    system = repeats = tool = 0
    for messages in conversations:
        if fit.system and messages and messages[0].get("role") == "system":
            system += 1
        if fit.tool and any(_bare_tool(m) for m in messages):
            tool += 1
            messages = [{**m, "role": "user"} if _bare_tool(m) else m for m in messages]
        if fit.repeats and any(a.get("role") == b.get("role") for a, b in zip(messages, messages[1:])):
            repeats += 1
    return system, repeats, tool


def fit_note(model_name: str, fit: TemplateFit, counts: tuple[int, int, int]) -> Optional[str]:
    """The check's note on the shaping, or None when no row changes."""
    parts = []
    if counts[0]:
        parts.append(
            f"has no system role: the system text of {counts[0]} rows goes at the start of the first user turn"
        )
    if counts[1]:
        parts.append(f"needs user and assistant turns to alternate: {counts[1]} rows have repeated turns merged")
    if counts[2]:
        parts.append(f"has no tool role: the tool results of {counts[2]} rows are user turns")
    if not parts:
        return None
    return f"the chat template of {model_name} " + "; it ".join(parts) + " (the samples below show the result)"
