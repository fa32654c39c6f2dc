"""Vision rows made ready for training (``data.media_prepare``: each row rendered, its images
processed once to count the tokens they make, rows a run cannot use left out and counted), with
what the images cost (``ImageStats``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import datasets

from trainer_core.data.media_prepare import prepare_media_data, prepare_media_rows
from trainer_core.data.tokenization import TokenizationStats
from trainer_core.kinds.vision.collator import VisionCollator

TOO_LONG_FIX = "raise max_seq_length or lower vision_image_size"


@dataclass
class ImageStats:
    """What the images of a split cost: ``images`` in all, ``tokens`` they expand to (all images),
    each image's (width, height) as the model sees it (after ``vision_image_size``) and each kept
    row's length in tokens with its images."""

    images: int = 0
    tokens: int = 0
    sizes: list[tuple[int, int]] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)  # tokens of each kept row, images included

    def add(self, media: list[Any], tokens: int, length: int) -> None:
        """Count one kept row: its opened images, the ``tokens`` they expand to, its ``length``."""
        self.images += len(media)
        self.tokens += tokens
        self.sizes.extend(picture.size for picture in media)
        self.lengths.append(length)

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
    images = ImageStats()
    kept, stats = prepare_media_rows(rows, collator, max_len, images, source, TOO_LONG_FIX)
    return kept, stats, images


def prepare_vision_data(request: Any, processor: Any, kind: Any) -> Any:
    """``data.prepared.prepare_data`` for a vision-language model (``media_prepare.prepare_media_data``
    with the vision collator): a ``PreparedData`` whose splits are canonical rows (``messages``,
    ``images``) and whose ``images`` are the training split's ``ImageStats``. ``kind``: the vision
    kind, whose rows are read. Raises DatasetError."""
    collator = VisionCollator(
        processor, request.max_seq_length, request.train_on_completions, request.vision_image_size
    )
    return prepare_media_data(request, collator, kind, ImageStats, "images", TOO_LONG_FIX)
