"""What a chat or an embeddings request must hold before it reaches the inference worker; each
refusal a ChatInputError naming the field (``messages``, ``input``) and the fix."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from trainer_core.refusals import explain
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import MAX_EMBEDDING_INPUT_CHARS, MAX_EMBEDDING_INPUTS, ChatMessage


def checked_inputs(texts: Any) -> list[str]:
    """``texts`` as a list of strings; ChatInputError naming ``input`` (and the text's index) unless
    there are 1 to ``MAX_EMBEDDING_INPUTS`` texts, each a non-empty string of at most
    ``MAX_EMBEDDING_INPUT_CHARS`` characters that UTF-8 can write (no lone surrogates)."""
    if not isinstance(texts, list) or not texts:
        raise ChatInputError("input: give a text or a list of 1 or more texts", fields=("input",))
    if len(texts) > MAX_EMBEDDING_INPUTS:
        raise ChatInputError(
            f"input: at most {MAX_EMBEDDING_INPUTS} texts in one request, not {len(texts)}; send them in parts",
            fields=("input",),
        )
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise ChatInputError(f"input[{i}]: give a non-empty text", fields=("input",))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # JSON's "\ud800" escapes: no tokenizer reads them
            raise ChatInputError(
                f"input[{i}]: the text holds characters that are not valid text (lone surrogates); send UTF-8 text",
                fields=("input",),
            ) from None
        if len(text) > MAX_EMBEDDING_INPUT_CHARS:
            raise ChatInputError(
                f"input[{i}]: at most {MAX_EMBEDDING_INPUT_CHARS:,} characters a text, not {len(text):,}; split it",
                fields=("input",),
            )
    return texts


def checked_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """``messages`` as plain dicts; ChatInputError unless there is at least one message, a system
    message comes only first, a tool's result follows a call (or another result) and the last
    message is the user's or a tool's result."""
    turns = []
    for i, message in enumerate(messages or []):
        try:
            turns.append(message if isinstance(message, ChatMessage) else ChatMessage.model_validate(message))
        except ValidationError as exc:
            raise ChatInputError(f"messages[{i}].{explain(exc)}", fields=("messages",)) from None
    if not turns:
        raise ChatInputError("messages: give at least one message (the user's)", fields=("messages",))
    if any(m.role == "system" for m in turns[1:]):
        raise ChatInputError("messages: a system message may only come first", fields=("messages",))
    for i, (before, turn) in enumerate(zip(turns, turns[1:]), start=1):
        if turn.role == "tool" and before.role not in ("assistant", "tool"):
            raise ChatInputError(
                f"messages[{i}]: a tool's result must follow the assistant's call", fields=("messages",)
            )
    if turns[-1].role not in ("user", "tool"):
        raise ChatInputError(
            f"messages: the last message must be the user's (role 'user') or a tool's result, not '{turns[-1].role}'",
            fields=("messages",),
        )
    return [m.model_dump() for m in turns]
