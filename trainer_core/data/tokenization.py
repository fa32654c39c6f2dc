"""Render canonical rows to token ids and labels (the loss mask), with truncation and counting.

Conversations are rendered with the tokenizer's own chat template. With ``train_on_completions``
only assistant tokens are labelled, in every assistant turn: each turn's content and its
end-of-turn token (``<|im_end|>`` in ChatML), never the ``<|im_start|>assistant\\n`` header. The
char span of an assistant turn is found by rendering prefixes of the conversation (TRL's
``assistant_only_loss`` needs ``{% generation %}`` markers, which most templates lack). A leading
assistant turn (no user turn before it) is trained too: its span is found by locating its content
in the rendering of that turn alone; when the template cannot render it so, the row is an error
that says so. Rows left without a trained token are dropped; when no row is left, the error names
the real cause (no assistant turn at all, or a prompt that fills ``max_seq_length``) and the first
row concerned.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from typing import Any, Optional

import datasets
import numpy as np

from trainer_core.data import progress
from trainer_core.data.files import DatasetError
from trainer_core.data.preference_tokens import encode_preference, is_preference_rows
from trainer_core.data.prompt_tokens import encode_prompts, is_prompt_rows
from trainer_core.data.template_fit import fit_conversation, template_fit

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
    return _finish(encoded, max_seq_length)


def encode_rows(
    dataset: datasets.Dataset,
    tokenizer: Any,
    max_seq_length: int,
    train_on_completions: bool,
    keep_columns: tuple[str, ...] = (),
    desc: Optional[str] = None,
) -> datasets.Dataset:
    """Every canonical row (none dropped) as columns ``input_ids`` and ``labels`` (cut to
    ``max_seq_length``; -100 where not trained) plus the counting columns ``full_length`` (tokens
    before truncation), ``trained`` (labelled tokens kept) and ``trainable`` (labelled tokens before
    truncation); ``keep_columns`` of the input stay beside them. What ``tokenize_dataset`` (and
    the pre-flight check) build on. Raises DatasetError as ``tokenize_dataset`` does for template
    failures."""
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

    def counted(batch: dict, indices: list[int], **kwargs: Any) -> dict:
        encoded = encode(batch, indices, **kwargs)
        if indices:
            progress.rows_done(indices[-1] + 1, total, "tokenized")
        return encoded

    return dataset.map(
        counted,
        fn_kwargs={"tokenizer": tokenizer, "max_len": max_seq_length, "completions_only": train_on_completions},
        batched=True,
        batch_size=BATCH_ROWS,
        with_indices=True,
        remove_columns=[c for c in dataset.column_names if c not in keep_columns],
        keep_in_memory=True,
        new_fingerprint=uuid.uuid4().hex,  # hashing the tokenizer is slow and pointless here
        desc=desc or f"Tokenizing {kind}",
    )


def _finish(encoded: datasets.Dataset, max_len: int) -> tuple[datasets.Dataset, TokenizationStats]:
    """Drop rows without labels, remove the counting columns and sum the stats."""
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
    """Conversation rows: the chat template's rendering (each conversation first shaped to what the
    template accepts: ``template_fit``); labels on assistant spans only or on all."""
    fit = template_fit(tokenizer)
    conversations = [fit_conversation(messages, fit) for messages in batch["messages"]]
    if not completions_only:
        texts = [_render(tokenizer, messages, False, index + 1) for messages, index in zip(conversations, indices)]
        ids_rows = tokenizer(texts, add_special_tokens=False)["input_ids"]
        return _pack(ids_rows, [list(ids) for ids in ids_rows], max_len)
    texts, spans = [], []
    for messages, index in zip(conversations, indices):
        text, row_spans = render_with_spans(messages, tokenizer, row=index + 1)
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


def render_with_spans(
    messages: list[dict[str, str]], tokenizer: Any, row: int = 0
) -> tuple[str, list[tuple[int, int]]]:
    """The conversation rendered by the chat template (no generation prompt) and the char spans
    ``[start, end)`` of each assistant turn: content plus end-of-turn token, without the header or
    the whitespace after the end-of-turn token. A leading assistant turn is located by its content
    in the rendering of that turn alone (see ``_leading_span``; one with empty content gets no span).
    Raises DatasetError when the template fails, a prefix rendering is not a prefix, or a leading
    assistant turn cannot be located (naming the row)."""
    leading = bool(messages) and messages[0]["role"] == "assistant"
    try:
        full = _render(tokenizer, messages, False, row)
    except DatasetError as exc:
        if not leading:
            raise
        raise _leading_error(tokenizer, row, f"it fails on this conversation: {exc.__cause__ or exc}") from exc
    spans = [span for span in [_leading_span(messages[0], tokenizer, full, row)] if span] if leading else []
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or i == 0:
            continue
        start = len(_prefix(tokenizer, messages[:i], True, full, row))
        last = i == len(messages) - 1
        end = len(full) if last else len(_prefix(tokenizer, messages[: i + 1], False, full, row))
        spans.append((start, start + len(full[start:end].rstrip())))
    return full, spans


def _leading_span(message: dict[str, str], tokenizer: Any, full: str, row: int) -> Optional[tuple[int, int]]:
    """Char span of a leading assistant turn in ``full``, or None for empty content (nothing to
    learn). The template renders that turn alone (which must start ``full``) and once more with
    empty content; the content (as written, or stripped if the template trims it) is where the two
    renderings differ, and the span runs from it to the end of the turn's rendering without
    trailing whitespace, so the end-of-turn token is in it and the header is not. DatasetError
    (``_leading_error``) when the turn cannot be rendered or located so."""
    content = message.get("content") or ""
    if not content.strip():
        return None
    alone = _render_turn(tokenizer, message, row)
    empty = _render_turn(tokenizer, {**message, "content": ""}, row)
    if not full.startswith(alone):
        raise _leading_error(tokenizer, row, "it renders that turn alone differently from the whole conversation")
    for text in dict.fromkeys((content, content.strip())):
        start = _insertion_point(alone, empty, text)
        if start is not None:
            return start, len(alone.rstrip())
    raise _leading_error(tokenizer, row, "its rendering of that turn does not hold the content as written")


def _render_turn(tokenizer: Any, message: dict[str, str], row: int) -> str:
    """One turn rendered alone; a failure is the leading-assistant error."""
    try:
        return _render(tokenizer, [message], False, row)
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


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool, row: int) -> str:
    """``apply_chat_template`` as text; DatasetError naming the model and the row when it fails."""
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    except (TemplateError, ValueError, TypeError) as exc:
        raise DatasetError(
            f"row {row}: the chat template of {tokenizer.name_or_path} cannot render this conversation: {exc}"
        ) from exc


def _prefix(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool, full: str, row: int) -> str:
    """Render the first turns of a conversation and check that the text starts the full rendering."""
    text = _render(tokenizer, messages, generation_prompt, row)
    if not full.startswith(text):
        raise DatasetError(
            f"row {row}: the chat template of {tokenizer.name_or_path} renders the conversation cut after {len(messages)} turn(s) "
            "differently from the whole conversation, so the assistant turns cannot be located; set train_on_completions=False "
            "or use a model whose template renders conversations turn by turn",
            fields=("train_on_completions",),
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
