"""Vision rows made ready for training: each row rendered, its images processed once to count the
tokens they make, and the rows a run cannot use left out (with counts, as the text path's
``tokenization.TokenizationStats`` has them).

The rows stay canonical (``messages`` + ``images``): the collator (``collator``) makes the
tensors batch by batch, as TRL does for images (pixels of a whole dataset would not fit in memory).
A row longer than ``max_seq_length`` is cut on the right only when the cut falls after its last
image token (a cut image would not match its features); otherwise it is left out and counted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.images import open_image
from trainer_core.data.tokenization import IGNORE, TokenizationStats
from trainer_core.kinds.vision.collator import VisionCollator, carry_labels

log = logging.getLogger(__name__)


@dataclass
class ImageStats:
    """What the images of a split cost: ``images`` in all, ``tokens`` they expand to (all images),
    each image's (width, height) as the model sees it (after ``vision_image_size``) and each kept
    row's length in tokens with its images."""

    images: int = 0
    tokens: int = 0
    sizes: list[tuple[int, int]] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)  # tokens of each kept row, images included

    @property
    def tokens_per_image(self) -> float:
        return self.tokens / self.images if self.images else 0.0

    def line(self) -> str:
        """e.g. "6 images, 300 x 168 to 300 x 172 px, 40 tokens each on average"."""
        if not self.images:
            return "no images"
        small = min(self.sizes, key=lambda s: s[0] * s[1])
        large = max(self.sizes, key=lambda s: s[0] * s[1])
        span = f"{small[0]} x {small[1]}" + (f" to {large[0]} x {large[1]}" if large != small else "")
        return f"{self.images} images, {span} px, {self.tokens_per_image:.0f} tokens each on average"


def prepare_vision_rows(
    rows: datasets.Dataset, collator: VisionCollator, max_len: int, source: str = "training data"
) -> tuple[datasets.Dataset, TokenizationStats, ImageStats]:
    """(the usable rows of ``rows``, their token counts, their image counts). Raises DatasetError
    naming the row when an image cannot be read or the template fails, and when no row is left
    (every row's images alone fill ``max_len``, or no row has an assistant turn)."""
    stats = TokenizationStats(
        rows=0, total_tokens=0, trained_tokens=0, truncated_rows=0, truncated_tokens=0, max_seq_length=max_len
    )
    images = ImageStats()
    kept: list[int] = []
    too_long = 0
    for index, row in enumerate(rows):
        try:
            text, ids, labels = collator.render(row["messages"], row=index + 1)
            pictures = [open_image(ref, collator.max_side) for ref in row["images"]]
        except RowError as exc:
            raise DatasetError(f"{source}, row {index + 1}: {exc}") from None
        encoded = collator.processor(
            text=[text], images=[pictures] if pictures else None, add_special_tokens=False, return_tensors="pt"
        )
        expanded = encoded["input_ids"][0].tolist()
        row_labels = carry_labels(ids, labels, expanded, collator.image_ids)
        image_positions = [i for i, token in enumerate(expanded) if token in collator.image_ids]
        if len(expanded) > max_len:
            if image_positions and image_positions[-1] >= max_len:
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
        images.images += len(pictures)
        images.tokens += len(image_positions)
        images.sizes.extend(picture.size for picture in pictures)
        images.lengths.append(len(expanded))
    if not kept:
        cause = (
            f"the images of {too_long} row(s) alone make more than max_seq_length={max_len} tokens: raise "
            "max_seq_length or lower vision_image_size"
            if too_long
            else "no row has an answer left to train on: each row needs an assistant turn"
        )
        raise DatasetError(f"{source}: no row can be trained: {cause}")
    if too_long:
        log.info("%s: %d row(s) left out: their images alone exceed max_seq_length=%d", source, too_long, max_len)
    return (rows if len(kept) == len(rows) else rows.select(kept)), stats, images


def prepare_vision_data(request: Any, processor: Any, kind: Any) -> Any:
    """``data.prepare.prepare_data`` for a vision-language model: the request's rows (with their
    images, ``rows``; text rows get an empty image list), split as for text, made ready
    by ``prepare_vision_rows``. ``kind``: the vision kind (``kind.VISION``), whose rows are read.
    Returns a ``PreparedData`` whose splits are canonical rows
    (``messages``, ``images``) and whose ``images`` are the training split's ``ImageStats``.
    Raises DatasetError."""
    from trainer_core.data.prepare import (
        PreparedData,
        has_eval_data,
        load_conversations,
        shared_system_message,
        split_validation,
    )

    collator = VisionCollator(
        processor, request.max_seq_length, request.train_on_completions, request.vision_image_size
    )
    train_rows, fmt = load_conversations(request, kind=kind)
    eval_rows = None
    if request.val_size > 0:
        train_rows, eval_rows = split_validation(train_rows, request)
    elif has_eval_data(request):
        eval_rows, _ = load_conversations(request, eval=True, kind=kind)
    train_rows, eval_rows = (_with_images(rows) for rows in (train_rows, eval_rows))
    train, stats, images = prepare_vision_rows(train_rows, collator, request.max_seq_length)
    eval_split, eval_stats = None, None
    if eval_rows is not None:
        eval_split, eval_stats, _ = prepare_vision_rows(eval_rows, collator, request.max_seq_length, "evaluation data")
    return PreparedData(
        train=train,
        eval=eval_split,
        format=fmt,
        stats=stats,
        eval_stats=eval_stats,
        system_message=shared_system_message(train),
        images=images,
    )


def _with_images(rows: Any) -> Any:
    """Conversation rows with an ``images`` column (empty lists added to text-only rows); None as is.
    Raises DatasetError for raw text rows (a vision model trains on conversations)."""
    if rows is None or "images" in rows.column_names:
        return rows
    if "messages" not in rows.column_names:
        raise DatasetError(
            "raw text rows cannot train a vision-language model here: give conversations (messages), "
            "with or without images"
        )
    return rows.add_column("images", [[] for _ in range(len(rows))])
