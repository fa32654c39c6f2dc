"""Batches of image rows for training: the processor's tensors plus labels on the answers only, image
tokens never scored (``data.media_chat``: the turns rendered with one image part per ``<image>``
marker, labelled by the text path's answer spans, carried over the processor's expansion of each
image into its tokens). Qwen2-VL's 3-D rotary position ids are made by the model from the
attention mask, so right padding is fine (TRL refuses padding-free batches for images)."""

from __future__ import annotations

from typing import Any, Optional

from trainer_core.data.images import MARKER, open_image
from trainer_core.data.media_chat import MediaChatCollator, carry_labels, known_token_ids
from trainer_core.data.media_chat import part_messages as media_part_messages

__all__ = ["VisionCollator", "carry_labels", "image_token_ids", "part_messages"]


def part_messages(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Canonical turns as content-part lists, one ``{"type": "image"}`` part per ``<image>`` marker
    (``media_chat.part_messages``)."""
    return media_part_messages(messages, MARKER, "image")


class VisionCollator(MediaChatCollator):
    """``collator(rows)`` -> the processor's batch (``input_ids``, ``attention_mask``, ``pixel_values``
    and the model's extras such as ``image_grid_thw``) plus ``labels`` (B, T), for rows with
    ``messages`` and ``images`` (``rows.VISION_FEATURES``). ``max_side``: the longest image side in
    pixels (``vision_image_size``; None: as the files are)."""

    marker, part, column = MARKER, "image", "images"

    def __init__(
        self, processor: Any, max_length: Optional[int], train_on_completions: bool, max_side: Optional[int] = None
    ) -> None:
        super().__init__(processor, max_length, train_on_completions, image_token_ids(processor))
        self.max_side = max_side

    @property
    def image_ids(self) -> set[int]:
        """The ids of the tokens that stand for images (``image_token_ids``)."""
        return self.media_ids

    def load(self, reference: str) -> Any:
        return open_image(reference, self.max_side)

    def media_inputs(self, media: list[list[Any]]) -> dict[str, Any]:
        return {"images": media if any(media) else None}


def image_token_ids(processor: Any) -> set[int]:
    """Token ids that stand for images in ``processor``'s rows: its image token and the tokens
    around it that processors and their tokenizers name (``<|vision_start|>``,
    ``<fake_token_around_image>``, Gemma 3's ``<start_of_image>`` and ``<image_soft_token>``, ...),
    those the tokenizer knows."""
    attributes = ("image_token", "boi_token", "eoi_token", "fake_image_token", "global_image_token")
    names = {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<image>", "<fake_token_around_image>"}
    names |= {"<start_of_image>", "<end_of_image>", "<image_soft_token>", "<global-img>"}  # Gemma 3, Idefics3
    return known_token_ids(processor, attributes, names)
