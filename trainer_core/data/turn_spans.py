"""Where a conversation's assistant turns lie in its chat-template rendering, and their labels.

The char span of an assistant turn is found by rendering prefixes of the conversation (TRL's
``assistant_only_loss`` needs ``{% generation %}`` markers, which most templates lack): each turn's
content and its end-of-turn token, never the header. ``extra`` is what ``apply_chat_template``
gets beside the messages (``tools=`` for a template that renders tools: ``data.tool_rows``), the
same for every prefix, so a template that puts the functions in the system or first user turn
renders each prefix as the start of the whole.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from trainer_core.data.errors import DatasetError

IGNORE = -100  # label of a token that is not trained on


def render_with_spans(
    messages: list[dict[str, Any]], tokenizer: Any, row: int = 0, extra: Optional[dict[str, Any]] = None
) -> tuple[str, list[tuple[int, int]]]:
    """The conversation rendered by the chat template (no generation prompt) and the char spans
    ``[start, end)`` of each assistant turn: content plus end-of-turn token, without the header or
    the whitespace after the end-of-turn token. A leading assistant turn is located by its content
    in the rendering of that turn alone (see ``_leading_span``; one with empty content gets no span).
    Raises DatasetError when the template fails, a prefix rendering is not a prefix, or a leading
    assistant turn cannot be located (naming the row)."""
    leading = bool(messages) and messages[0]["role"] == "assistant"
    try:
        full = render_text(tokenizer, messages, False, row, extra)
    except DatasetError as exc:
        if not leading:
            raise
        raise _leading_error(tokenizer, row, f"it fails on this conversation: {exc.__cause__ or exc}") from exc
    spans = [span for span in [_leading_span(messages[0], tokenizer, full, row, extra)] if span] if leading else []
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i == 0:
            continue
        start = _prefix_end(tokenizer, messages[:i], True, full, row, extra)
        last = i == len(messages) - 1
        end = len(full) if last else _prefix_end(tokenizer, messages[: i + 1], False, full, row, extra)
        spans.append((start, start + len(full[start:end].rstrip())))
    return full, spans


def _leading_span(
    message: dict[str, Any], tokenizer: Any, full: str, row: int, extra: Optional[dict[str, Any]] = None
) -> Optional[tuple[int, int]]:
    """Char span of a leading assistant turn in ``full``, or None for empty content (nothing to
    learn). The template renders that turn alone (which must start ``full``) and once more with
    empty content; the content (as written, or stripped if the template trims it) is where the two
    renderings differ, and the span runs from it to the end of the turn's rendering without
    trailing whitespace, so the end-of-turn token is in it and the header is not. DatasetError
    (``_leading_error``) when the turn cannot be rendered or located so."""
    content = message.get("content") or ""
    if not content.strip():
        return None
    alone = _render_turn(tokenizer, message, row, extra)
    empty = _render_turn(tokenizer, {**message, "content": ""}, row, extra)
    if not full.startswith(alone):
        raise _leading_error(tokenizer, row, "it renders that turn alone differently from the whole conversation")
    for text in dict.fromkeys((content, content.strip())):
        start = _insertion_point(alone, empty, text)
        if start is not None:
            return start, len(alone.rstrip())
    raise _leading_error(tokenizer, row, "its rendering of that turn does not hold the content as written")


def _render_turn(tokenizer: Any, message: dict[str, Any], row: int, extra: Optional[dict[str, Any]] = None) -> str:
    """One turn rendered alone; a failure is the leading-assistant error."""
    try:
        return render_text(tokenizer, [message], False, row, extra)
    except DatasetError as exc:
        raise _leading_error(tokenizer, row, f"it fails on that turn alone: {exc.__cause__ or exc}") from exc


def _insertion_point(alone: str, empty: str, content: str) -> Optional[int]:
    """The last ``h`` with ``alone == empty[:h] + content + empty[h:]``, or None. O(len(alone))."""
    if len(alone) != len(empty) + len(content):
        return None
    prefix = len(os.path.commonprefix([alone, empty]))  # alone[:h] == empty[:h] needs h <= prefix
    suffix = len(os.path.commonprefix([alone[::-1], empty[::-1]]))  # and len(empty) - h <= suffix
    for h in range(min(prefix, len(empty)), max(len(empty) - suffix, 0) - 1, -1):
        if alone.startswith(content, h):
            return h
    return None


def _leading_error(tokenizer: Any, row: int, cause: str) -> DatasetError:
    """The error for a leading assistant turn whose tokens cannot be located."""
    return DatasetError(
        f"row {row} starts with an assistant turn and the chat template of {tokenizer.name_or_path} cannot render it "
        f"so that its tokens can be located ({cause}): add the user turn before it or remove the row"
    )


def render_text(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    generation_prompt: bool,
    row: int,
    extra: Optional[dict[str, Any]] = None,
) -> str:
    """``apply_chat_template`` (with ``extra`` keyword arguments, e.g. ``tools``) as text;
    DatasetError naming the model and the row when it fails."""
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt, **(extra or {})
        )
    except (TemplateError, ValueError, TypeError) as exc:
        raise DatasetError(
            f"row {row}: the chat template of {tokenizer.name_or_path} cannot render this conversation: {exc}"
        ) from exc


def _prefix_end(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    generation_prompt: bool,
    full: str,
    row: int,
    extra: Optional[dict[str, Any]] = None,
) -> int:
    """Where the rendering of the first turns of a conversation ends in the full rendering ``full``:
    it must start ``full``, but for whitespace the template writes only when a turn is not the last
    (Hermes 3 writes a newline after a tool result that another turn follows). DatasetError otherwise."""
    text = render_text(tokenizer, messages, generation_prompt, row, extra)
    if full.startswith(text):
        return len(text)
    same = len(os.path.commonprefix([full, text]))
    gap = len(full[same:]) - len(full[same:].lstrip())  # whitespace only the whole rendering has here
    if gap and full.startswith(text[same:], same + gap):
        return len(text) + gap
    raise DatasetError(
        f"row {row}: the chat template of {tokenizer.name_or_path} renders the conversation cut after {len(messages)} turn(s) "
        "differently from the whole conversation (as a template does that writes the tools before the last user turn, "
        "or ends the last turn with a token of its own), so the assistant turns cannot be located; set "
        "train_on_completions=False or use a model whose template renders conversations turn by turn",
        fields=("train_on_completions",),
    )


def span_labels(ids: list[int], offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """Labels for one row: a token's id where its chars overlap an assistant span, else -100.
    ``offsets`` are the tokenizer's (start, end) char offsets, one per token; ``spans`` are sorted."""
    labels = [IGNORE] * len(ids)
    j = 0
    for k, (start, end) in enumerate(offsets):
        while j < len(spans) and spans[j][1] <= start:
            j += 1
        if j == len(spans):
            break
        if end > start and end > spans[j][0]:
            labels[k] = ids[k]
    return labels
