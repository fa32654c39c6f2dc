"""Chat rows with media made ready for training, whatever the medium (``kinds.vision.prepare``,
``kinds.audio_chat.prepare``): each row rendered, its media processed once to count the tokens
they make, and the rows a run cannot use left out (with counts, as the text path's
``tokenization.TokenizationStats`` has them).

The rows stay canonical (``messages`` + the media column): the collator
(``media_chat.MediaChatCollator``) makes the tensors batch by batch, as TRL does for images (the
pixels or features of a whole dataset would not fit in memory). A row longer than
``max_seq_length`` is cut on the right only when the cut falls after its last media token (a cut
image or clip would not match its features); otherwise it is left out and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.media_chat import MediaChatCollator, carry_labels
from trainer_core.data.tokenization import IGNORE, TokenizationStats

log = logging.getLogger(__name__)


class MediaStats(Protocol):
    """What a split's media cost, counted row by row (``ImageStats``, ``AudioStats``)."""

    lengths: list[int]

    def add(self, media: list[Any], tokens: int, length: int) -> None:
        """Count one kept row: its loaded ``media``, the ``tokens`` they expand to, its ``length``."""


def prepare_media_rows(
    rows: datasets.Dataset,
    collator: MediaChatCollator,
    max_len: int,
    stats_of_media: MediaStats,
    source: str = "training data",
    too_long_fix: str = "raise max_seq_length",
) -> tuple[datasets.Dataset, TokenizationStats]:
    """(the usable rows of ``rows``, their token counts); ``stats_of_media`` counts the kept rows'
    media. Raises DatasetError naming the row when a medium cannot be read or the template fails,
    and when no row is left (every row's media alone fill ``max_len``: ``too_long_fix`` says what
    to change; or no row has an assistant turn)."""
    stats = TokenizationStats(
        rows=0, total_tokens=0, trained_tokens=0, truncated_rows=0, truncated_tokens=0, max_seq_length=max_len
    )
    kept: list[int] = []
    too_long = 0
    for index, row in enumerate(rows):
        try:
            text, ids, labels = collator.render(row["messages"], row=index + 1)
            media = [collator.load(ref) for ref in row[collator.column]]
        except RowError as exc:
            raise DatasetError(f"{source}, row {index + 1}: {exc}") from None
        encoded = collator.processor(
            text=[text], **collator.media_inputs([media]), add_special_tokens=False, return_tensors="pt"
        )
        expanded = encoded["input_ids"][0].tolist()
        row_labels = carry_labels(ids, labels, expanded, collator.media_ids)
        positions = [i for i, token in enumerate(expanded) if token in collator.media_ids]
        if len(expanded) > max_len:
            if positions and positions[-1] >= max_len:
                too_long += 1
                stats.dropped_rows += 1
                continue
            stats.truncated_rows += 1
            stats.truncated_tokens += len(expanded) - max_len
            expanded, row_labels = expanded[:max_len], row_labels[:max_len]
        trained = sum(1 for label in row_labels[1:] if label != IGNORE)
        if not trained:
            stats.dropped_rows += 1
            continue
        kept.append(index)
        stats.rows += 1
        stats.total_tokens += len(expanded)
        stats.trained_tokens += trained
        stats_of_media.add(media, len(positions), len(expanded))
    if not kept:
        cause = (
            f"the {collator.column} of {too_long} row(s) alone make more than max_seq_length={max_len} tokens: "
            f"{too_long_fix}"
            if too_long
            else "no row has an answer left to train on: each row needs an assistant turn"
        )
        raise DatasetError(f"{source}: no row can be trained: {cause}")
    if too_long:
        log.info(
            "%s: %d row(s) left out: their %s alone exceed max_seq_length=%d",
            source,
            too_long,
            collator.column,
            max_len,
        )
    return (rows if len(kept) == len(rows) else rows.select(kept)), stats


def prepare_media_data(
    request: Any,
    collator: MediaChatCollator,
    kind: Any,
    new_stats: Callable[[], MediaStats],
    media_field: str,
    too_long_fix: str = "raise max_seq_length",
) -> Any:
    """``data.prepared.prepare_data`` for a media chat model: the request's rows as ``kind`` reads them
    (with their media; text rows get an empty media list), split as for text, made ready by
    ``prepare_media_rows``. Returns a ``PreparedData`` whose splits are canonical rows
    (``messages`` and ``collator.column``) and whose ``media_field`` ("images", "audio") is the
    training split's stats (``new_stats()``). Raises DatasetError."""
    from trainer_core.data.prepare import has_eval_data, load_conversations, split_validation
    from trainer_core.data.prepared import PreparedData
    from trainer_core.data.system_message import shared_system_message

    train_rows, fmt = load_conversations(request, kind=kind)
    eval_rows = None
    if request.val_size > 0:
        train_rows, eval_rows = split_validation(train_rows, request)
    elif has_eval_data(request):
        eval_rows, _ = load_conversations(request, eval=True, kind=kind)
    train_rows, eval_rows = (with_media_column(rows, collator.column) for rows in (train_rows, eval_rows))
    media = new_stats()
    train, stats = prepare_media_rows(train_rows, collator, request.max_seq_length, media, too_long_fix=too_long_fix)
    eval_split, eval_stats = None, None
    if eval_rows is not None:
        eval_split, eval_stats = prepare_media_rows(
            eval_rows, collator, request.max_seq_length, new_stats(), "evaluation data", too_long_fix
        )
    return PreparedData(
        train=train,
        eval=eval_split,
        format=fmt,
        stats=stats,
        eval_stats=eval_stats,
        system_message=shared_system_message(train),
        **{media_field: media},
    )


def with_media_column(rows: Any, column: str) -> Any:
    """Conversation rows with a ``column`` of media (empty lists added to text-only rows); None as
    is. Raises DatasetError for raw text rows (a media chat model trains on conversations)."""
    if rows is None or column in rows.column_names:
        return rows
    if "messages" not in rows.column_names:
        raise DatasetError(
            f"raw text rows cannot train this model here: give conversations (messages), with or without {column}"
        )
    return rows.add_column(column, [[] for _ in range(len(rows))])
