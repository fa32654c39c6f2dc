"""Prepared data for training: the request's splits tokenized (SFT, through the token cache:
``data.token_cache.tokenized``, so a second Start on the same data and settings reads the Arrow
files the first, or the check's exact pass, wrote), or canonical rows with their counts for the
methods TRL tokenizes itself (preference pairs, GRPO prompts)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Optional

import datasets

from trainer_core.data.prepare import has_eval_data, load_conversations, split_validation
from trainer_core.data.prompt_fit import fitting_prompts
from trainer_core.data.token_cache.tokenized import CacheHit, tokenized
from trainer_core.data.tokenization import TokenizationStats, finish_rows, tokenize_dataset
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType, TrainingMethod

log = logging.getLogger(__name__)


@dataclass
class PreparedData:
    """Tokenized splits (columns ``input_ids``, ``labels``) with their layout and token counts."""

    train: datasets.Dataset
    eval: Optional[datasets.Dataset]
    format: FormatType
    stats: TokenizationStats
    eval_stats: Optional[TokenizationStats]
    system_message: Optional[str] = None  # the one system message every training row has (run.json)
    tool_format: Optional[str] = None  # how the rows' tools were rendered (``tool_rows.trained_tool_format``, run.json)
    images: Any = None  # a vision run's image counts (``kinds.vision.prepare.ImageStats``)
    audio: Any = None  # an audio chat run's clip counts (``kinds.audio_chat.prepare.AudioStats``)
    cache: Optional[CacheHit] = None  # how the training split was tokenized (``token_cache``), for the run's log


class SplitRows:
    """A request's canonical splits, read once and only when asked for (a cache hit never asks):
    ``train()`` / ``eval()`` give (rows, format value) as ``token_cache.tokenized`` wants them."""

    def __init__(self, request: TrainingStartRequest) -> None:
        self.request = request
        self._read: Optional[tuple[datasets.Dataset, Optional[datasets.Dataset], FormatType]] = None

    def _split(self) -> tuple[datasets.Dataset, Optional[datasets.Dataset], FormatType]:
        if self._read is None:
            train, fmt = load_conversations(self.request)
            held_out = None
            if self.request.val_size > 0:
                train, held_out = split_validation(train, self.request)
            self._read = (train, held_out, fmt)
        return self._read

    def train(self) -> tuple[datasets.Dataset, Optional[str]]:
        rows, _, fmt = self._split()
        return rows, fmt.value

    def eval(self) -> tuple[datasets.Dataset, Optional[str]]:
        if self.request.val_size > 0:
            return self._split()[1], None
        return load_conversations(self.request, eval=True)[0], None


def prepare_data(request: TrainingStartRequest, tokenizer: Any) -> PreparedData:
    """Load, normalise and tokenize the training data (and the evaluation data: files, a Hub split,
    or the ``val_size`` share of the training rows, which training then does not see) with
    ``request.max_seq_length`` and ``request.train_on_completions``; SFT splits come from the token
    cache when it holds them. Preference methods get their canonical rows (TRL tokenizes them) with
    the counts of ``data.preference_tokens``. Raises DatasetError."""
    if request.training_method == TrainingMethod.sft:
        return _sft_data(request, tokenizer)
    train_rows, fmt = load_conversations(request)
    eval_rows = None
    if request.val_size > 0:
        train_rows, eval_rows = split_validation(train_rows, request)
    elif has_eval_data(request):
        eval_rows, _ = load_conversations(request, eval=True)
    if request.training_method == TrainingMethod.grpo:  # TRL renders the prompts and samples answers
        train_rows, stats = fitting_prompts(train_rows, tokenizer, request.max_seq_length)
        eval_stats = None
        if eval_rows is not None:
            eval_rows, eval_stats = fitting_prompts(eval_rows, tokenizer, request.max_seq_length)
        return PreparedData(train=train_rows, eval=eval_rows, format=fmt, stats=stats, eval_stats=eval_stats)
    # preference methods: TRL tokenizes the rows itself; we count them
    train_rows, stats = _answerable(train_rows, tokenizer, request.max_seq_length)
    eval_stats = None
    if eval_rows is not None:
        eval_rows, eval_stats = _answerable(eval_rows, tokenizer, request.max_seq_length)
    return PreparedData(train=train_rows, eval=eval_rows, format=fmt, stats=stats, eval_stats=eval_stats)


def _sft_data(request: TrainingStartRequest, tokenizer: Any) -> PreparedData:
    """SFT splits through the token cache; logs "data: cache hit <key>, N rows, X.X s" (the whole
    data stage) and keeps that ``CacheHit`` on the result for the run's log."""
    started = time.perf_counter()
    rows = SplitRows(request)
    encoded, hit = tokenized(request, tokenizer, "train", rows.train)
    train, stats = finish_rows(encoded, request.max_seq_length)
    eval_split, eval_stats = None, None
    if has_eval_data(request):
        held_out, _ = tokenized(request, tokenizer, "eval", rows.eval)
        eval_split, eval_stats = finish_rows(held_out, request.max_seq_length)
    hit.seconds = time.perf_counter() - started
    log.info(hit.line())
    return PreparedData(
        train=train,
        eval=eval_split,
        format=FormatType(hit.format) if hit.format else FormatType.auto,
        stats=stats,
        eval_stats=eval_stats,
        system_message=hit.system_message,
        tool_format=hit.tool_format,
        cache=hit,
    )


def _answerable(rows: datasets.Dataset, tokenizer: Any, max_len: int) -> tuple[datasets.Dataset, TokenizationStats]:
    """Canonical preference rows without those whose prompt alone fills ``max_len`` (no answer token
    would be left: DPOTrainer drops them itself, but ORPO's and KTO's would score an empty answer,
    a NaN loss), with their counts. Raises DatasetError when no row is left."""
    columns = tuple(rows.column_names)
    kept, stats = tokenize_dataset(rows, tokenizer, max_len, True, keep_columns=columns)
    return kept.select_columns(list(columns)), stats


__all__ = ["PreparedData", "SplitRows", "prepare_data"]
