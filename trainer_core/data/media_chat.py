"""Batches of chat rows with media (images, audio) for the models that read them through a
processor: the processor's tensors plus labels on the answers only, media tokens never scored.

TRL's ``DataCollatorForVisionLanguageModeling`` scores every token (media tokens included) unless
the chat template carries ``{% generation %}`` markers, which the Qwen2-VL, Qwen2-Audio, Gemma 3,
SmolVLM and LLaVA templates lack. Here the labels come from the text path's own answer spans
(``tokenization.render_with_spans``: each assistant turn's content and end-of-turn token):

1. the turns are rendered by the processor's chat template with one media part per marker
   (``<image>``, ``<audio>``), and the assistant spans found by rendering prefixes;
2. that text is tokenized as it stands (a clip or an image is one placeholder token there) and
   labelled by the spans (``tokenization.span_labels``);
3. the processor expands each placeholder into the medium's tokens (Qwen2-VL: one
   ``<|image_pad|>`` per merged 28 x 28 patch; Qwen2-Audio: one ``<|AUDIO|>`` per 40 ms) and makes
   the pixels or the log-mel features;
4. the labels are carried over to the expanded row by aligning the two token lists
   (``difflib.SequenceMatcher``): tokens the expansion inserted get -100, as does every media token.

So a media token is never scored, and the prompt is not either with ``train_on_completions``.
Batches are padded on the right. Each kind subclasses ``MediaChatCollator`` with its marker, its
media tokens and how its media are read (``kinds.vision.collator``, ``kinds.audio_chat.collator``).
"""

from __future__ import annotations

import difflib
from typing import Any, Optional

from trainer_core.data.tokenization import IGNORE, render_with_spans, span_labels

CUT_KEYS = ("input_ids", "attention_mask", "labels", "mm_token_type_ids", "token_type_ids")  # (B, T) tensors


def part_messages(messages: list[dict[str, str]], marker: str, part: str) -> list[dict[str, Any]]:
    """Canonical turns as content-part lists: each ``marker`` (e.g. ``<image>``) a ``{"type": part}``
    part, the text between markers ``{"type": "text"}`` parts (empty ones left out). Every turn
    becomes a list, as the SmolVLM / Idefics3 templates need (they iterate over the content)."""
    out = []
    for message in messages:
        parts: list[dict[str, str]] = []
        for i, text in enumerate(message["content"].split(marker)):
            if i:
                parts.append({"type": part})
            if text:
                parts.append({"type": "text", "text": text})
        out.append({"role": message["role"], "content": parts})
    return out


class ChatRenderer:
    """A processor seen as the tokenizer ``render_with_spans`` expects (its chat template, its name)."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.name_or_path = getattr(processor.tokenizer, "name_or_path", "the model")

    def apply_chat_template(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        return self.processor.apply_chat_template(messages, **kwargs)


class MediaChatCollator:
    """``collator(rows)`` -> the processor's batch (``input_ids``, ``attention_mask`` and the media
    tensors) plus ``labels`` (B, T), for rows with ``messages`` and a media column. Subclasses set
    ``marker``, ``part`` and ``column`` and implement ``media_inputs``; ``media_ids`` are the token
    ids that stand for the medium. ``max_length`` cuts rows on the right (prepared data has no row
    whose cut falls inside its media)."""

    marker = "<image>"  # where one item of the medium goes in a canonical turn
    part = "image"  # the content part the chat template renders for it
    column = "images"  # the rows' column of canonical references

    def __init__(self, processor: Any, max_length: Optional[int], train_on_completions: bool, media_ids: set[int]):
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.max_length = max_length
        self.train_on_completions = train_on_completions
        self.renderer = ChatRenderer(processor)
        self.media_ids = media_ids

    def media_inputs(self, media: list[list[Any]]) -> dict[str, Any]:
        """The processor's keyword arguments for each row's loaded media (``load``), e.g.
        ``{"images": ...}``; {} when no row has any."""
        raise NotImplementedError

    def load(self, reference: str) -> Any:
        """One canonical reference of the medium, read as the processor takes it. Raises RowError."""
        raise NotImplementedError

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        texts, before = [], []
        for row in rows:
            text, ids, labels = self.render(row["messages"])
            texts.append(text)
            before.append((ids, labels))
        media = [[self.load(ref) for ref in row[self.column]] for row in rows]
        batch = self.processor(
            text=texts,
            **self.media_inputs(media),
            padding=True,
            padding_side="right",
            add_special_tokens=False,
            return_tensors="pt",
        )
        batch["labels"] = self.expanded_labels(batch["input_ids"], batch["attention_mask"], before)
        if self.max_length is not None and batch["input_ids"].shape[1] > self.max_length:
            for key in CUT_KEYS:
                if key in batch:
                    batch[key] = batch[key][:, : self.max_length]
        return batch

    def render(self, messages: list[dict[str, str]], row: int = 0) -> tuple[str, list[int], list[int]]:
        """(the rendered conversation, its token ids before media expansion, their labels). Raises
        DatasetError as ``render_with_spans`` does."""
        turns = part_messages(messages, self.marker, self.part)
        if self.train_on_completions:
            text, spans = render_with_spans(turns, self.renderer, row=row)
        else:
            text, spans = self.renderer.apply_chat_template(turns, tokenize=False), None
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=spans is not None)
        ids = encoding["input_ids"]
        labels = span_labels(ids, encoding["offset_mapping"], spans) if spans is not None else list(ids)
        return text, ids, [IGNORE if token in self.media_ids else label for token, label in zip(ids, labels)]

    def expanded_labels(self, input_ids: Any, attention_mask: Any, before: list[tuple[list[int], list[int]]]) -> Any:
        """Labels (B, T) for the processor's expanded rows: each row's labels carried over from its
        (ids, labels) before expansion (``carry_labels``), -100 on padding and on every media token."""
        import torch

        labels = torch.full_like(input_ids, IGNORE)
        for i, (ids, row_labels) in enumerate(before):
            length = int(attention_mask[i].sum())
            row = input_ids[i, :length].tolist()
            labels[i, :length] = torch.tensor(carry_labels(ids, row_labels, row, self.media_ids), dtype=labels.dtype)
        return labels


def carry_labels(
    ids_before: list[int], labels_before: list[int], ids_after: list[int], media_ids: set[int]
) -> list[int]:
    """Labels for ``ids_after`` (the expanded row): where a stretch of it matches ``ids_before``
    (difflib's matching blocks), the labels of those tokens; elsewhere (inserted by the
    expansion) -100; always -100 on ``media_ids``."""
    out = [IGNORE] * len(ids_after)
    matcher = difflib.SequenceMatcher(None, ids_before, ids_after, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[block.b + k] = labels_before[block.a + k]
    return [IGNORE if token in media_ids else label for token, label in zip(ids_after, out)]


def known_token_ids(processor: Any, attributes: tuple[str, ...], names: set[str]) -> set[int]:
    """The ids of the tokens that ``processor`` or its tokenizer name by ``attributes`` (e.g.
    ``image_token``) plus ``names``, those its tokenizer knows (never the unknown token's id)."""
    tokenizer = processor.tokenizer
    names = names | {getattr(owner, name, None) for owner in (processor, tokenizer) for name in attributes}
    ids = {getattr(processor, f"{attribute}_id", None) for attribute in attributes}
    vocab = tokenizer.get_vocab()
    for name in names:
        if isinstance(name, str) and name in vocab:
            ids.add(tokenizer.convert_tokens_to_ids(name))
    ids.discard(None)
    if tokenizer.unk_token_id is not None:
        ids.discard(tokenizer.unk_token_id)
    return {int(i) for i in ids}
