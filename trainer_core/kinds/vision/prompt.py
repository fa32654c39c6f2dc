"""A conversation with images made into a vision-language model's inputs (the kind's
``chat_inputs``), as training made its rows
(``collator``: the processor's chat template over content parts, one image part per
``<image>`` marker; images opened with the pixel limit of ``data.images``)."""

from __future__ import annotations

from typing import Any

from trainer_core.data.errors import RowError
from trainer_core.data.images import MARKER, open_image
from trainer_core.kinds.vision.collator import part_messages
from trainer_core.serving.errors import ChatInputError

MAX_SIDE = 1024  # longest image side given to the processor in chat (pixels)


def placed(messages: list[dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    """(turns with one ``<image>`` marker per image, the images in order): a turn whose markers
    match its image count keeps them, one without markers gets them before its text. Raises
    ChatInputError naming the message when a turn has markers but not as many as images."""
    turns, images = [], []
    for i, message in enumerate(messages):
        content, pictures = message["content"], list(message.get("images") or [])
        markers = content.count(MARKER)
        if pictures and markers and markers != len(pictures):
            raise ChatInputError(
                f"messages[{i}]: it has {markers} {MARKER} marker(s) and {len(pictures)} image(s): give one marker "
                "per image, or none (the images then come before the text)",
                fields=("messages",),
            )
        if pictures and not markers:
            content = MARKER * len(pictures) + content
        turns.append({"role": message["role"], "content": content})
        images.extend(pictures)
    return turns, images


def vision_inputs(processor: Any, messages: list[dict[str, Any]], device: str) -> dict[str, Any]:
    """The processor's tensors (``input_ids`` (1, T), ``attention_mask``, ``pixel_values`` and the
    model's extras) for ``messages`` plus the generation prompt, on ``device``. Raises
    ChatInputError for an unreadable or oversized image or a template that cannot render."""
    from jinja2 import TemplateError

    turns, images = placed(messages)
    try:
        pictures = [open_image(image, MAX_SIDE) for image in images]
    except RowError as exc:
        raise ChatInputError(f"messages: {exc}", fields=("messages",)) from None
    try:
        text = processor.apply_chat_template(part_messages(turns), tokenize=False, add_generation_prompt=True)
    except (TemplateError, ValueError, TypeError) as exc:
        raise ChatInputError(
            f"messages: the chat template of this model cannot render the conversation: {exc}", fields=("messages",)
        ) from None
    inputs = processor(
        text=[text], images=[pictures] if pictures else None, add_special_tokens=False, return_tensors="pt"
    )
    return {key: value.to(device) for key, value in inputs.items()}
