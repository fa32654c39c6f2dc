"""Training rows tokenized exactly as ``data.tokenization.tokenize_dataset`` tokenizes them, but
with every row kept and its counts: the check needs per-row lengths before truncation and the
reason a row would be dropped, which ``tokenize_dataset`` sums up and removes.

The per-row encoders are the data layer's own (``_encode_conversations`` / ``_encode_texts``, run
with the same ``Dataset.map`` settings), so masks, truncation and leading assistant turns are the
training ones; ``tests/trainer_core/preflight/test_check.py`` checks the sums against ``tokenize_dataset``'s stats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import datasets
import numpy as np

from trainer_core.data import tokenization
from trainer_core.data.preference_tokens import PREFERENCE_COLUMNS
from trainer_core.data.tool_rows import TOOLS


@dataclass
class RowCounts:
    """Per-row token counts of one split, each of shape (rows,): ``full`` tokens before truncation,
    ``trained`` labelled tokens kept, ``trainable`` labelled tokens before truncation; ``kept``
    marks rows training keeps (trained > 0). ``max_seq_length`` is the cut."""

    full: np.ndarray
    trained: np.ndarray
    trainable: np.ndarray
    max_seq_length: int

    @property
    def kept(self) -> np.ndarray:
        return self.trained > 0

    @property
    def cut(self) -> np.ndarray:
        """Tokens kept per row, (rows,)."""
        return np.minimum(self.full, self.max_seq_length)


def encode_rows(
    rows: datasets.Dataset, tokenizer: Any, max_seq_length: int, train_on_completions: bool
) -> datasets.Dataset:
    """``rows`` (canonical ``messages`` or ``text``, plus any bookkeeping columns, which are kept)
    as columns ``input_ids``, ``labels`` (cut to ``max_seq_length``; -100 where not trained),
    ``full_length``, ``trained`` and ``trainable``, one row per input row (none dropped): the data
    layer's own ``tokenization.encode_rows``. Raises DatasetError like ``tokenize_dataset``."""
    bookkeeping = tuple(c for c in rows.column_names if c not in ("messages", TOOLS, "text", *PREFERENCE_COLUMNS))
    return tokenization.encode_rows(
        rows, tokenizer, max_seq_length, train_on_completions, keep_columns=bookkeeping, desc="Checking tokens"
    )


def row_counts(encoded: datasets.Dataset, max_seq_length: int) -> RowCounts:
    """The counting columns of ``encode_rows``' output as arrays."""

    def column(name: str) -> np.ndarray:
        return np.asarray(encoded.data.column(name).to_numpy(), dtype=np.int64)

    if len(encoded) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return RowCounts(empty, empty, empty, max_seq_length)
    return RowCounts(column("full_length"), column("trained"), column("trainable"), max_seq_length)


def with_media(counts: RowCounts, media: list[int]) -> RowCounts:
    """``counts`` with each row's ``media`` tokens (rows,) (its clips' audio tokens, which the
    tokenizer alone does not see) added to its full length; trained tokens unchanged (media tokens
    are never scored), except none for a row whose media alone fill ``max_seq_length``: training
    leaves it out, as a cut clip would not match its features (``data.media_prepare``)."""
    tokens = np.asarray(media, dtype=np.int64)
    trained = np.where(tokens >= counts.max_seq_length, 0, counts.trained)
    return RowCounts(counts.full + tokens, trained, counts.trainable, counts.max_seq_length)


__all__ = ["RowCounts", "encode_rows", "row_counts", "with_media"]
