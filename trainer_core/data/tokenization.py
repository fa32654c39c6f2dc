"""Render canonical rows to token ids and labels (the loss mask), with truncation and counting.

Conversations are rendered with the tokenizer's own chat template. With ``train_on_completions``
only assistant tokens are labelled, in every assistant turn: each turn's content and its
end-of-turn token (``<|im_end|>`` in ChatML), never the ``<|im_start|>assistant\\n`` header. The
char span of an assistant turn is found by rendering prefixes of the conversation (TRL's
``assistant_only_loss`` needs ``{% generation %}`` markers, which most templates lack).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np

from trainer_core.data.files import DatasetError

log = logging.getLogger(__name__)

IGNORE = -100  # label of a token that is not trained on
BATCH_ROWS = 256


@dataclass
class TokenizationStats:
    """Token counts of one tokenized split. ``rows``, ``total_tokens`` and ``trained_tokens``
    (tokens with a label) count the rows kept; ``truncated_rows`` / ``truncated_tokens`` (tokens cut
    off) and ``dropped_rows`` (no labelled token left) count over all input rows."""

    rows: int
    total_tokens: int
    trained_tokens: int
    truncated_rows: int
    truncated_tokens: int
    max_seq_length: int
    dropped_rows: int = 0


def tokenize_dataset(
    dataset: datasets.Dataset, tokenizer: Any, max_seq_length: int, train_on_completions: bool
) -> tuple[datasets.Dataset, TokenizationStats]:
    """Tokenize canonical rows (column ``messages`` or ``text``) into columns ``input_ids`` and
    ``labels`` (both list[int] of length <= max_seq_length; labels are -100 where not trained).

    Text rows get the tokenizer's special tokens plus eos, all labelled. Rows longer than
    ``max_seq_length`` keep their start. Rows left without any labelled token are dropped and
    counted. Raises DatasetError when the template cannot be used for the mask (naming the model),
    the template fails on a row (naming the row), or no row is left (raise max_seq_length).
    """
    if "messages" in dataset.column_names:
        encode, kind = _encode_conversations, "conversations"
    elif "text" in dataset.column_names:
        encode, kind = _encode_texts, "text"
    else:
        raise DatasetError(f"cannot tokenize columns {dataset.column_names}: normalise the data first (messages or text)")
    encoded = dataset.map(
        encode,
        fn_kwargs={"tokenizer": tokenizer, "max_len": max_seq_length, "completions_only": train_on_completions},
        batched=True,
        batch_size=BATCH_ROWS,
        with_indices=True,
        remove_columns=dataset.column_names,
        keep_in_memory=True,
        new_fingerprint=uuid.uuid4().hex,  # hashing the tokenizer is slow and pointless here
        desc=f"Tokenizing {kind}",
    )
    return _finish(encoded, max_seq_length)


def _finish(encoded: datasets.Dataset, max_len: int) -> tuple[datasets.Dataset, TokenizationStats]:
    """Drop rows without labels, remove the counting columns and sum the stats."""
    full = np.asarray(encoded.data.column("full_length").to_numpy(), dtype=np.int64)  # (rows,)
    trained = np.asarray(encoded.data.column("trained").to_numpy(), dtype=np.int64)  # (rows,)
    keep = trained > 0
    if not keep.any():
        raise DatasetError(
            f"no row has a trained token within max_seq_length={max_len} (every prompt fills it): raise max_seq_length"
        )
    dropped = int((~keep).sum())
    if dropped:
        log.warning("dropped %d of %d rows: no assistant token within max_seq_length=%d tokens", dropped, len(keep), max_len)
        encoded = encoded.select(np.flatnonzero(keep), keep_in_memory=True)
    stats = TokenizationStats(
        rows=int(keep.sum()),
        total_tokens=int(np.minimum(full, max_len)[keep].sum()),
        trained_tokens=int(trained[keep].sum()),
        truncated_rows=int((full > max_len).sum()),
        truncated_tokens=int(np.maximum(full - max_len, 0).sum()),
        max_seq_length=max_len,
        dropped_rows=dropped,
    )
    log.info("tokenized %d rows: %d tokens, %d trained, %d rows truncated", stats.rows, stats.total_tokens, stats.trained_tokens, stats.truncated_rows)
    return encoded.remove_columns(["full_length", "trained"]), stats


def _pack(ids_rows: list[list[int]], label_rows: list[list[int]], max_len: int) -> dict[str, list]:
    """Truncated columns plus the counting columns ``full_length`` and ``trained``."""
    out: dict[str, list] = {"input_ids": [], "labels": [], "full_length": [], "trained": []}
    for ids, labels in zip(ids_rows, label_rows):
        labels = labels[:max_len]
        out["input_ids"].append(ids[:max_len])
        out["labels"].append(labels)
        out["full_length"].append(len(ids))
        out["trained"].append(sum(label != IGNORE for label in labels))
    return out


def _encode_texts(batch: dict, indices: list[int], tokenizer: Any, max_len: int, completions_only: bool) -> dict:
    """Text rows: special tokens + text + eos, every token labelled."""
    if tokenizer.eos_token_id is None:
        raise DatasetError(f"the tokenizer of {tokenizer.name_or_path} has no eos token: text rows need one to end")
    ids_rows = []
    for ids in tokenizer(batch["text"])["input_ids"]:
        ids_rows.append(ids if ids and ids[-1] == tokenizer.eos_token_id else ids + [tokenizer.eos_token_id])
    return _pack(ids_rows, [list(ids) for ids in ids_rows], max_len)


def _encode_conversations(batch: dict, indices: list[int], tokenizer: Any, max_len: int, completions_only: bool) -> dict:
    """Conversation rows: the chat template's rendering; labels on assistant spans only or on all."""
    if not completions_only:
        texts = [_render(tokenizer, messages, False, index + 1) for messages, index in zip(batch["messages"], indices)]
        ids_rows = tokenizer(texts, add_special_tokens=False)["input_ids"]
        return _pack(ids_rows, [list(ids) for ids in ids_rows], max_len)
    texts, spans = [], []
    for messages, index in zip(batch["messages"], indices):
        text, row_spans = render_with_spans(messages, tokenizer, row=index + 1)
        texts.append(text)
        spans.append(row_spans)
    try:
        encoding = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError as exc:  # slow (Python) tokenizers have no offsets
        raise DatasetError(f"train_on_completions needs a fast tokenizer, and {tokenizer.name_or_path} has none: set train_on_completions=False") from exc
    ids_rows = encoding["input_ids"]
    label_rows = [span_labels(ids, offsets, row_spans) for ids, offsets, row_spans in zip(ids_rows, encoding["offset_mapping"], spans)]
    return _pack(ids_rows, label_rows, max_len)


def render_with_spans(messages: list[dict[str, str]], tokenizer: Any, row: int = 0) -> tuple[str, list[tuple[int, int]]]:
    """The conversation rendered by the chat template (no generation prompt) and the char spans
    ``[start, end)`` of each assistant turn: content plus end-of-turn token, without the header or
    the whitespace after the end-of-turn token. A leading assistant turn (no context) gets no span.
    Raises DatasetError when the template fails or a prefix rendering is not a prefix."""
    full = _render(tokenizer, messages, False, row)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i == 0:
            continue
        start = len(_prefix(tokenizer, messages[:i], True, full, row))
        last = i == len(messages) - 1
        end = len(full) if last else len(_prefix(tokenizer, messages[: i + 1], False, full, row))
        spans.append((start, start + len(full[start:end].rstrip())))
    return full, spans


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool, row: int) -> str:
    """``apply_chat_template`` as text; DatasetError naming the model and the row when it fails."""
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    except (TemplateError, ValueError, TypeError) as exc:
        raise DatasetError(f"row {row}: the chat template of {tokenizer.name_or_path} cannot render this conversation: {exc}") from exc


def _prefix(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool, full: str, row: int) -> str:
    """Render the first turns of a conversation and check that the text starts the full rendering."""
    text = _render(tokenizer, messages, generation_prompt, row)
    if not full.startswith(text):
        raise DatasetError(
            f"row {row}: the chat template of {tokenizer.name_or_path} renders the conversation cut after {len(messages)} turn(s) "
            "differently from the whole conversation, so the assistant turns cannot be located; set train_on_completions=False "
            "or use a model whose template renders conversations turn by turn"
        )
    return text


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
