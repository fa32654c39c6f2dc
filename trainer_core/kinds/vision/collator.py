"""Batches of image rows for training: the processor's tensors plus labels on the answers only.

TRL's ``DataCollatorForVisionLanguageModeling`` scores every token (image tokens included) unless
the chat template carries ``{% generation %}`` markers, which the Qwen2-VL, Gemma 3, SmolVLM and
LLaVA templates lack. Here the labels come from the text path's own answer spans
(``tokenization.render_with_spans``: each assistant turn's content and end-of-turn token):

1. the turns are rendered by the processor's chat template with one image part per ``<image>``
   marker, and the assistant spans found by rendering prefixes;
2. that text is tokenized as it stands (an image is one placeholder token there) and labelled by
   the spans (``tokenization.span_labels``);
3. the processor expands each placeholder into the image's tokens (Qwen2-VL: one
   ``<|image_pad|>`` per merged 28 x 28 patch; SmolVLM: a grid of tiles) and makes the pixels;
4. the labels are carried over to the expanded row by aligning the two token lists
   (``difflib.SequenceMatcher``): tokens the expansion inserted get -100, as does every image token.

So an image token is never scored, and the prompt is not either with ``train_on_completions``.
Batches are padded on the right (TRL refuses padding-free batches for images, and the position
ids of Qwen2-VL's 3-D rotary embedding are made by the model from the attention mask).
"""

from __future__ import annotations

import difflib
from typing import Any, Optional

from trainer_core.data.images import MARKER, open_image
from trainer_core.data.tokenization import IGNORE, render_with_spans, span_labels


def part_messages(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Canonical turns as content-part lists: each ``<image>`` marker an ``{"type": "image"}`` part,
    the text between markers ``{"type": "text"}`` parts (empty ones left out). Every turn becomes
    a list, as the SmolVLM / Idefics3 templates need (they iterate over the content)."""
    out = []
    for message in messages:
        parts: list[dict[str, str]] = []
        for i, text in enumerate(message["content"].split(MARKER)):
            if i:
                parts.append({"type": "image"})
            if text:
                parts.append({"type": "text", "text": text})
        out.append({"role": message["role"], "content": parts})
    return out


class _Renderer:
    """The processor seen as the tokenizer ``render_with_spans`` expects (its chat template, its name)."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.name_or_path = getattr(processor.tokenizer, "name_or_path", "the model")

    def apply_chat_template(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        return self.processor.apply_chat_template(messages, **kwargs)


class VisionCollator:
    """``collator(rows)`` -> the processor's batch (``input_ids``, ``attention_mask``, ``pixel_values``
    and the model's extras such as ``image_grid_thw``) plus ``labels`` (B, T), for rows with
    ``messages`` and ``images`` (``rows.VISION_FEATURES``). ``max_side``: the longest image side in
    pixels (``vision_image_size``; None: as the files are). ``max_length`` cuts rows on the right;
    prepared data has no row whose cut would fall inside its images (``prepare``)."""

    def __init__(
        self, processor: Any, max_length: Optional[int], train_on_completions: bool, max_side: Optional[int] = None
    ) -> None:
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.max_length = max_length
        self.train_on_completions = train_on_completions
        self.max_side = max_side
        self.renderer = _Renderer(processor)
        self.image_ids = image_token_ids(processor)

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        texts, before = [], []
        for row in rows:
            text, ids, labels = self.render(row["messages"])
            texts.append(text)
            before.append((ids, labels))
        images = [[open_image(ref, self.max_side) for ref in row["images"]] for row in rows]
        batch = self.processor(
            text=texts,
            images=images if any(images) else None,
            padding=True,
            padding_side="right",
            add_special_tokens=False,
            return_tensors="pt",
        )
        batch["labels"] = self.expanded_labels(batch["input_ids"], batch["attention_mask"], before)
        if self.max_length is not None and batch["input_ids"].shape[1] > self.max_length:
            for key in ("input_ids", "attention_mask", "labels", "mm_token_type_ids", "token_type_ids"):
                if key in batch:
                    batch[key] = batch[key][:, : self.max_length]
        return batch

    def render(self, messages: list[dict[str, str]], row: int = 0) -> tuple[str, list[int], list[int]]:
        """(the rendered conversation, its token ids before image expansion, their labels). Raises
        DatasetError as ``render_with_spans`` does."""
        turns = part_messages(messages)
        if self.train_on_completions:
            text, spans = render_with_spans(turns, self.renderer, row=row)
        else:
            text, spans = self.renderer.apply_chat_template(turns, tokenize=False), None
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=spans is not None)
        ids = encoding["input_ids"]
        labels = span_labels(ids, encoding["offset_mapping"], spans) if spans is not None else list(ids)
        return text, ids, [IGNORE if token in self.image_ids else label for token, label in zip(ids, labels)]

    def expanded_labels(self, input_ids: Any, attention_mask: Any, before: list[tuple[list[int], list[int]]]) -> Any:
        """Labels (B, T) for the processor's expanded rows: each row's labels carried over from its
        (ids, labels) before expansion (``carry_labels``), -100 on padding and on every image token."""
        import torch

        labels = torch.full_like(input_ids, IGNORE)
        for i, (ids, row_labels) in enumerate(before):
            length = int(attention_mask[i].sum())
            row = input_ids[i, :length].tolist()
            labels[i, :length] = torch.tensor(carry_labels(ids, row_labels, row, self.image_ids), dtype=labels.dtype)
        return labels


def carry_labels(
    ids_before: list[int], labels_before: list[int], ids_after: list[int], image_ids: set[int]
) -> list[int]:
    """Labels for ``ids_after`` (the expanded row): where a stretch of it matches ``ids_before``
    (difflib's matching blocks), the labels of those tokens; elsewhere (inserted by the
    expansion) -100; always -100 on ``image_ids``."""
    out = [IGNORE] * len(ids_after)
    matcher = difflib.SequenceMatcher(None, ids_before, ids_after, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[block.b + k] = labels_before[block.a + k]
    return [IGNORE if token in image_ids else label for token, label in zip(ids_after, out)]


def image_token_ids(processor: Any) -> set[int]:
    """Token ids that stand for images in ``processor``'s rows: its image token and the tokens
    around it that processors and their tokenizers name (``<|vision_start|>``,
    ``<fake_token_around_image>``, Gemma 3's ``<start_of_image>`` and ``<image_soft_token>``, ...),
    those the tokenizer knows."""
    tokenizer = processor.tokenizer
    attributes = ("image_token", "boi_token", "eoi_token", "fake_image_token", "global_image_token")
    names = {getattr(owner, name, None) for owner in (processor, tokenizer) for name in attributes}
    names |= {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<image>", "<fake_token_around_image>"}
    names |= {"<start_of_image>", "<end_of_image>", "<image_soft_token>", "<global-img>"}  # Gemma 3, Idefics3
    ids = {getattr(processor, "image_token_id", None)}
    for name in names:
        if isinstance(name, str) and name in tokenizer.get_vocab():
            ids.add(tokenizer.convert_tokens_to_ids(name))
    ids.discard(None)
    if tokenizer.unk_token_id is not None:
        ids.discard(tokenizer.unk_token_id)
    return {int(i) for i in ids}
