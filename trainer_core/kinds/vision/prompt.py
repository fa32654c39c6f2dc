"""A conversation with images made into a vision-language model's inputs (the kind's
``chat_inputs``), as training made its rows (``serving.media_prompt``: the processor's chat template
over content parts, one image part per ``<image>`` marker; images opened with the pixel limit of
``data.images``)."""

from __future__ import annotations

from typing import Any

from trainer_core.data.errors import RowError
from trainer_core.data.images import MARKER, open_image
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.media_prompt import placed as placed_media
from trainer_core.serving.media_prompt import prompt_text, refuse_other_media

MAX_SIDE = 1024  # longest image side given to the processor in chat (pixels)


def placed(messages: list[dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    """(turns with one ``<image>`` marker per image, the images in order): ``media_prompt.placed``
    over the messages' ``images``. Raises ChatInputError naming the message."""
    return placed_media(messages, "images", MARKER, "image")


def vision_inputs(processor: Any, messages: list[dict[str, Any]], device: str) -> dict[str, Any]:
    """The processor's tensors (``input_ids`` (1, T), ``attention_mask``, ``pixel_values`` and the
    model's extras) for ``messages`` plus the generation prompt, on ``device``. Raises
    ChatInputError for an unreadable or oversized image, an audio clip, or a template that cannot
    render."""
    refuse_other_media(messages, "audios", "vision-language")
    turns, images = placed(messages)
    try:
        pictures = [open_image(image, MAX_SIDE) for image in images]
    except RowError as exc:
        raise ChatInputError(f"messages: {exc}", fields=("messages",)) from None
    text = prompt_text(processor, turns, MARKER, "image")
    inputs = processor(
        text=[text], images=[pictures] if pictures else None, add_special_tokens=False, return_tensors="pt"
    )
    return {key: value.to(device) for key, value in inputs.items()}
