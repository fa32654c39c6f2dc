"""Training rows tokenized exactly as ``data.tokenization.tokenize_dataset`` tokenizes them, but
with every row kept and its counts: the check needs per-row lengths before truncation and the
reason a row would be dropped, which ``tokenize_dataset`` sums up and removes.

Conversations and text come through the token cache (``data.token_cache.tokenized``), so the
check's exact pass and Start share one tokenization; the per-row encoders are the data layer's own, so masks, truncation and leading assistant turns are the
training ones; ``tests/trainer_core/preflight/test_check.py`` checks the sums against ``tokenize_dataset``'s stats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import datasets
import numpy as np

from trainer_core.data import tokenization
from trainer_core.data.preference_tokens import PREFERENCE_COLUMNS, is_preference_rows
from trainer_core.data.prompt_tokens import is_prompt_rows
from trainer_core.data.token_cache.tokenized import CacheHit, tokenized
from trainer_core.data.tool_rows import TOOLS
from trainer_core.schemas import TrainingStartRequest


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


def tokens(
    request: TrainingStartRequest, tokenizer: Any, split: str, rows: datasets.Dataset, fmt: Optional[str]
) -> tuple[datasets.Dataset, Optional[CacheHit]]:
    """``rows`` (canonical ``messages`` or ``text`` plus bookkeeping columns) as ``encode_rows``
    makes them, one row per input row (none dropped), with the bookkeeping columns beside them.
    Conversations and text come through the token cache (``token_cache.tokenized``: the same
    entry Start reads, ``split`` "train" or "eval", ``fmt`` the rows' format); other rows
    (preference pairs, prompts) are encoded here. Raises DatasetError like ``tokenize_dataset``."""
    bookkeeping = [c for c in rows.column_names if c not in ("messages", TOOLS, "text", *PREFERENCE_COLUMNS)]
    if is_preference_rows(rows.column_names) or is_prompt_rows(rows.column_names):
        encoded = tokenization.encode_rows(
            rows,
            tokenizer,
            request.max_seq_length,
            request.train_on_completions,
            keep_columns=tuple(bookkeeping),
            desc="Checking tokens",
        )
        return encoded, None
    encoded, hit = tokenized(request, tokenizer, split, lambda: (rows, fmt), desc="Checking tokens")
    if bookkeeping:  # beside the tokens, row for row (``rows`` may carry a split's indices mapping)
        encoded = datasets.concatenate_datasets(
            [encoded, rows.select_columns(bookkeeping).flatten_indices(keep_in_memory=True)], axis=1
        )
    return encoded, hit


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


__all__ = ["RowCounts", "row_counts", "tokens", "with_media"]
