"""A chat conversation with media (images, audio clips) made into the text a processor reads: the
part the kinds that chat with media share (``kinds.vision.prompt``, ``kinds.audio_chat.prompt``).
Each turn's media (its ``images`` / ``audios``: ``data:`` URLs) go where its markers are, one
each, or else before its text, as training placed them (``data.media_rows.place_markers``)."""

from __future__ import annotations

from typing import Any

from trainer_core.data.media_chat import part_messages
from trainer_core.serving.errors import ChatInputError


def placed(messages: list[dict[str, Any]], key: str, marker: str, noun: str) -> tuple[list[dict[str, str]], list[str]]:
    """(turns with one ``marker`` per item of ``message[key]``, the items in order): a turn whose
    markers match its item count keeps them, one without markers gets them before its text. Raises
    ChatInputError naming the message when a turn has markers but not as many as items (``noun``:
    "image", "audio clip")."""
    turns, items = [], []
    for i, message in enumerate(messages):
        content, given = message["content"], list(message.get(key) or [])
        markers = content.count(marker)
        if given and markers and markers != len(given):
            raise ChatInputError(
                f"messages[{i}]: it has {markers} {marker} marker(s) and {len(given)} {noun}(s): give one marker "
                f"per {noun}, or none (they then come before the text)",
                fields=("messages",),
            )
        if given and not markers:
            content = marker * len(given) + content
        turns.append({"role": message["role"], "content": content})
        items.extend(given)
    return turns, items


def prompt_text(processor: Any, turns: list[dict[str, str]], marker: str, part: str) -> str:
    """``turns`` rendered by ``processor``'s chat template with one ``part`` per ``marker`` plus the
    generation prompt. Raises ChatInputError when the template cannot render them."""
    from jinja2 import TemplateError

    try:
        return processor.apply_chat_template(
            part_messages(turns, marker, part), tokenize=False, add_generation_prompt=True
        )
    except (TemplateError, ValueError, TypeError) as exc:
        raise ChatInputError(
            f"messages: the chat template of this model cannot render the conversation: {exc}", fields=("messages",)
        ) from None


def refuse_other_media(messages: list[dict[str, Any]], key: str, kind_label: str) -> None:
    """Raise ChatInputError naming the first message that holds ``key`` items (e.g. ``images``),
    which a ``kind_label`` model does not read."""
    for i, message in enumerate(messages):
        if message.get(key):
            raise ChatInputError(
                f"messages[{i}]: it holds {key} and this {kind_label} model does not read them: remove them",
                fields=("messages",),
            )
