"""The check's view of a request's data: rows per source, the ``val_size`` split made as training
makes it, and every row tokenized as training tokenizes it (none dropped, counts kept)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import datasets
import numpy as np

from trainer_core.data.prepare import split_validation
from trainer_core.data.token_cache.tokenized import CacheHit
from trainer_core.preflight.sources import Source, read_eval_sources, read_train_sources
from trainer_core.preflight.tokens import RowCounts, row_counts, tokens, with_media
from trainer_core.schemas import TrainingStartRequest

BOOKKEEPING = ["_source", "_row"]  # source index and 1-based file row of each row


@dataclass
class Gathered:
    """``sources`` (training ones first, then evaluation files), the training rows (after the
    val_size split) and the evaluation rows (the split or the eval files), each with the
    bookkeeping columns ``_source`` / ``_row``; with a tokenizer also their ``encode_rows``
    output and counts."""

    sources: list[Source]
    train: datasets.Dataset
    eval: Optional[datasets.Dataset]
    train_encoded: Optional[datasets.Dataset] = None
    train_counts: Optional[RowCounts] = None
    eval_counts: Optional[RowCounts] = None
    eval_from_split: bool = False  # the evaluation rows are the val_size share of the training rows
    tokenize_seconds: Optional[float] = None  # wall time of tokenizing both splits
    media_tokens: int = 0  # tokens the rows' media add (``count_media``), in the counts above
    cache: Optional[CacheHit] = None  # how the training split was tokenized (``data.token_cache``)

    def where(self, index: int) -> str:
        """ "row N of FILE" for training row ``index``."""
        return f"row {self.train[index]['_row']} of {self.sources[self.train[index]['_source']].name}"

    def source_of_train(self) -> np.ndarray:
        """Source index of each training row, (rows,)."""
        # not .data: a split keeps an indices mapping; numpy format: no Python list of every row
        return np.asarray(self.train.with_format("numpy")["_source"], dtype=np.int64)

    def source_of_eval(self) -> np.ndarray:
        """Source index of each evaluation row, (rows,) (empty without evaluation rows)."""
        return np.asarray(self.eval["_source"] if self.eval is not None else [], dtype=np.int64)


def _tagged(sources: list[Source], first_index: int) -> Optional[datasets.Dataset]:
    """The sources' rows joined, with ``_source`` (index from ``first_index``) and ``_row``."""
    parts = []
    for offset, source in enumerate(sources):
        rows = source.rows.add_column("_source", [first_index + offset] * len(source.rows))
        parts.append(rows.add_column("_row", list(range(source.first_row, source.first_row + len(source.rows)))))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def gather(request: TrainingStartRequest, tokenizer: Optional[Any], notes: bool = True) -> Gathered:
    """Read the request's data (with the files' reading notes when ``notes``) and tokenize it when
    ``tokenizer`` is given. The val_size split
    equals training's: ``split_validation`` on the sources joined in order (the split depends only on
    the row count and ``random_seed``). Raises DatasetError for data training cannot read or render."""
    train_sources = read_train_sources(request, notes)
    train = _tagged(train_sources, 0)
    eval_rows, eval_sources = None, []
    if request.val_size > 0:
        train, eval_rows = split_validation(train, request)
    else:
        eval_sources = read_eval_sources(request, notes)
        eval_rows = _tagged(eval_sources, len(train_sources))
    found = Gathered(
        sources=[*train_sources, *eval_sources], train=train, eval=eval_rows, eval_from_split=request.val_size > 0
    )
    if tokenizer is None:
        return found
    started = time.perf_counter()
    fmt = train_sources[0].format if train_sources else None
    found.train_encoded, found.cache = tokens(request, tokenizer, "train", train, fmt)
    found.train_counts = row_counts(found.train_encoded, request.max_seq_length)
    if eval_rows is not None:
        eval_encoded, _ = tokens(request, tokenizer, "eval", eval_rows, None)
        found.eval_counts = row_counts(eval_encoded, request.max_seq_length)
    found.tokenize_seconds = time.perf_counter() - started
    return found


def count_media(found: Gathered, kind: Any, folder: Optional[Path]) -> None:
    """Add the tokens each row's media make in the model saved in ``folder`` (the model ``kind``'s
    ``media_tokens``: e.g. an audio chat model's audio tokens per clip) to ``found``'s counts of
    both splits, so the token totals, the histogram and the estimates hold them. Nothing without
    counts or where the kind counts none."""
    for split, name in ((found.train, "train_counts"), (found.eval, "eval_counts")):
        counts = getattr(found, name)
        media = kind.media_tokens(folder, split) if split is not None and counts is not None else None
        if media is not None:
            setattr(found, name, with_media(counts, media))
            found.media_tokens += int(sum(media))


__all__ = ["BOOKKEEPING", "Gathered", "count_media", "gather"]
