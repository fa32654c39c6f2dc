"""Render canonical rows to token ids and labels (the loss mask), with truncation and counting.

Conversations are rendered with the tokenizer's own chat template, with the row's tools as the
template takes them (``tool_rows.conversation``). With ``train_on_completions`` only assistant
tokens are labelled, in every assistant turn (calls included; tool results never): each turn's
content and its end-of-turn token (``<|im_end|>`` in ChatML), never the
``<|im_start|>assistant\\n`` header; ``turn_spans`` locates them. A leading
assistant turn (no user turn before it) is trained too: its span is found by locating its content
in the rendering of that turn alone; when the template cannot render it so, the row is an error
that says so. Rows left without a trained token are dropped; when no row is left, the error names
the real cause (no assistant turn at all, or a prompt that fills ``max_seq_length``) and the first
row concerned.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Optional

import datasets
import numpy as np

from trainer_core.data import progress
from trainer_core.data.errors import RowError
from trainer_core.data.files import DatasetError
from trainer_core.data.preference_tokens import encode_preference, is_preference_rows
from trainer_core.data.prompt_tokens import encode_prompts, is_prompt_rows
from trainer_core.data.tool_rows import TOOLS, conversation
from trainer_core.data.turn_spans import IGNORE, render_text, render_with_spans, span_labels

log = logging.getLogger(__name__)

__all__ = [
    "IGNORE",
    "TokenizationStats",
    "encode_rows",
    "finish_rows",
    "render_with_spans",
    "span_labels",
    "tokenize_dataset",
]
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
    dataset: datasets.Dataset,
    tokenizer: Any,
    max_seq_length: int,
    train_on_completions: bool,
    keep_columns: tuple[str, ...] = (),
) -> tuple[datasets.Dataset, TokenizationStats]:
    """Tokenize canonical rows (column ``messages`` or ``text``) into columns ``input_ids`` and
    ``labels`` (both list[int] of length <= max_seq_length; labels are -100 where not trained).

    Text rows get the tokenizer's special tokens plus eos, all labelled. Rows longer than
    ``max_seq_length`` keep their start. Rows left without any labelled token are dropped and
    counted. Raises DatasetError when the template cannot be used for the mask (naming the model),
    the template fails on a row or cannot locate a leading assistant turn (naming the row), or no
    row is left (naming the first row without an assistant turn, or the first whose prompt fills
    ``max_seq_length``).
    """
    encoded = encode_rows(dataset, tokenizer, max_seq_length, train_on_completions, keep_columns=keep_columns)
    return finish_rows(encoded, max_seq_length)


def encode_rows(
    dataset: datasets.Dataset,
    tokenizer: Any,
    max_seq_length: int,
    train_on_completions: bool,
    keep_columns: tuple[str, ...] = (),
    desc: Optional[str] = None,
    num_proc: int = 1,
    cache_file_name: Optional[str] = None,
) -> datasets.Dataset:
    """Every canonical row (none dropped) as columns ``input_ids`` and ``labels`` (cut to
    ``max_seq_length``; -100 where not trained) plus the counting columns ``full_length`` (tokens
    before truncation), ``trained`` (labelled tokens kept) and ``trainable`` (labelled tokens before
    truncation); ``keep_columns`` of the input stay beside them. What ``tokenize_dataset`` (and
    the pre-flight check) build on. ``num_proc`` processes share the rows; with ``cache_file_name``
    the output is written there (``name_0000i_of_0000n.arrow`` with several processes) and read back
    memory mapped instead of being held in memory. Raises DatasetError as ``tokenize_dataset`` does
    for template failures."""
    if is_preference_rows(dataset.column_names):
        encode, kind = encode_preference, "preference rows"
    elif is_prompt_rows(dataset.column_names):
        encode, kind = encode_prompts, "prompts"
    elif "messages" in dataset.column_names:
        encode, kind = _encode_conversations, "conversations"
    elif "text" in dataset.column_names:
        encode, kind = _encode_texts, "text"
    else:
        raise DatasetError(
            f"cannot tokenize columns {dataset.column_names}: normalise the data first (messages or text)"
        )
    total = len(dataset)
    num_proc = max(1, min(num_proc, total))

    def counted(batch: dict, indices: list[int], rank: Optional[int] = None, **kwargs: Any) -> dict:
        encoded = encode(batch, indices, **kwargs)
        if rank is not None:  # one of several processes: counted in shared memory, told by this one
            progress.add_rows(rank, len(indices))
        elif indices:
            progress.rows_done(indices[-1] + 1, total, "tokenized")
        return encoded

    shared = progress.across_processes(num_proc, total, "tokenized") if num_proc > 1 else contextlib.nullcontext()
    with shared:
        return dataset.map(
            counted,
            fn_kwargs={"tokenizer": tokenizer, "max_len": max_seq_length, "completions_only": train_on_completions},
            batched=True,
            batch_size=BATCH_ROWS,
            with_indices=True,
            with_rank=num_proc > 1,
            num_proc=num_proc if num_proc > 1 else None,
            remove_columns=[c for c in dataset.column_names if c not in keep_columns],
            keep_in_memory=cache_file_name is None,
            cache_file_name=cache_file_name,
            new_fingerprint=uuid.uuid4().hex,  # hashing the tokenizer is slow and pointless here
            desc=desc or f"Tokenizing {kind}",
        )


def finish_rows(encoded: datasets.Dataset, max_len: int) -> tuple[datasets.Dataset, TokenizationStats]:
    """``encode_rows``' output without the rows that have no label and without the counting
    columns, with its summed stats. Raises DatasetError when no row is left."""
    full = np.asarray(encoded.data.column("full_length").to_numpy(), dtype=np.int64)  # (rows,)
    trained = np.asarray(encoded.data.column("trained").to_numpy(), dtype=np.int64)  # (rows,)
    trainable = np.asarray(encoded.data.column("trainable").to_numpy(), dtype=np.int64)  # (rows,) before truncation
    keep = trained > 0
    if not keep.any():
        raise DatasetError(_nothing_trained(trainable, max_len))
    dropped = int((~keep).sum())
    if dropped:
        untrained = int((trainable == 0).sum())
        log.warning(
            "dropped %d of %d rows: %d without an assistant turn, %d with no assistant token within "
            "max_seq_length=%d tokens",
            dropped,
            len(keep),
            untrained,
            dropped - untrained,
            max_len,
        )
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
    log.info(
        "tokenized %d rows: %d tokens, %d trained, %d rows truncated",
        stats.rows,
        stats.total_tokens,
        stats.trained_tokens,
        stats.truncated_rows,
    )
    return encoded.remove_columns(["full_length", "trained", "trainable"]), stats


def _nothing_trained(trainable: np.ndarray, max_len: int) -> str:
    """Why no row has a trained token: rows without any labelled token (no assistant turn) and/or
    rows whose labelled tokens truncation cut off; ``trainable`` (rows,) counts before truncation."""
    unlabelled, cut = np.flatnonzero(trainable == 0), np.flatnonzero(trainable > 0)
    no_turn = (
        f"{len(unlabelled)} row(s) have no assistant turn to train on (the first is row {unlabelled[0] + 1}); "
        "with train_on_completions only assistant turns are trained"
        if len(unlabelled)
        else ""
    )
    too_long = (
        f"{len(cut)} row(s) have their assistant tokens after max_seq_length={max_len} tokens (every prompt "
        f"fills it; the first is row {cut[0] + 1})"
        if len(cut)
        else ""
    )
    if not len(cut):
        return f"no row has a trained token: {no_turn}: add assistant turns or set train_on_completions=False"
    if not len(unlabelled):
        return f"no row has a trained token within max_seq_length={max_len}: {too_long}: raise max_seq_length"
    return f"no row has a trained token: {no_turn}, and {too_long}: add assistant turns or raise max_seq_length"


def _pack(ids_rows: list[list[int]], label_rows: list[list[int]], max_len: int) -> dict[str, list]:
    """Truncated columns plus the counting columns ``full_length``, ``trained`` (labelled tokens
    kept) and ``trainable`` (labelled tokens before truncation)."""
    out: dict[str, list] = {"input_ids": [], "labels": [], "full_length": [], "trained": [], "trainable": []}
    for ids, labels in zip(ids_rows, label_rows):
        kept = labels[:max_len]
        out["input_ids"].append(ids[:max_len])
        out["labels"].append(kept)
        out["full_length"].append(len(ids))
        out["trained"].append(sum(label != IGNORE for label in kept))
        out["trainable"].append(sum(label != IGNORE for label in labels))
    return out


def _encode_texts(batch: dict, indices: list[int], tokenizer: Any, max_len: int, completions_only: bool) -> dict:
    """Text rows: special tokens + text + eos, every token labelled."""
    if tokenizer.eos_token_id is None:
        raise DatasetError(f"the tokenizer of {tokenizer.name_or_path} has no eos token: text rows need one to end")
    ids_rows = []
    for ids in tokenizer(batch["text"])["input_ids"]:
        ids_rows.append(ids if ids and ids[-1] == tokenizer.eos_token_id else ids + [tokenizer.eos_token_id])
    return _pack(ids_rows, [list(ids) for ids in ids_rows], max_len)


def _encode_conversations(
    batch: dict, indices: list[int], tokenizer: Any, max_len: int, completions_only: bool
) -> dict:
    """Conversation rows: the chat template's rendering (each conversation first given its tools and
    shaped to what the template accepts: ``tool_rows.conversation``); labels on assistant spans only
    or on all."""
    tools = batch.get(TOOLS) or [""] * len(indices)
    rows = [template_row(tokenizer, m, t, index + 1) for m, t, index in zip(batch["messages"], tools, indices)]
    if not completions_only:
        texts = [
            render_text(tokenizer, messages, False, index + 1, extra) for (messages, extra), index in zip(rows, indices)
        ]
        ids_rows = tokenizer(texts, add_special_tokens=False)["input_ids"]
        return _pack(ids_rows, [list(ids) for ids in ids_rows], max_len)
    texts, spans = [], []
    for (messages, extra), index in zip(rows, indices):
        text, row_spans = render_with_spans(messages, tokenizer, row=index + 1, extra=extra)
        texts.append(text)
        spans.append(row_spans)
    try:
        encoding = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError as exc:  # slow (Python) tokenizers have no offsets
        raise DatasetError(
            f"train_on_completions needs a fast tokenizer, and {tokenizer.name_or_path} has none: set train_on_completions=False",
            fields=("train_on_completions",),
        ) from exc
    ids_rows = encoding["input_ids"]
    label_rows = [
        span_labels(ids, offsets, row_spans)
        for ids, offsets, row_spans in zip(ids_rows, encoding["offset_mapping"], spans)
    ]
    return _pack(ids_rows, label_rows, max_len)


def template_row(tokenizer: Any, messages: list[dict[str, str]], tools: Optional[str], row: int) -> tuple[list, dict]:
    """``tool_rows.conversation`` for canonical row ``row`` (1-based); DatasetError naming it."""
    try:
        return conversation(tokenizer, messages, tools)
    except RowError as exc:
        raise DatasetError(f"row {row}: {exc}") from None
