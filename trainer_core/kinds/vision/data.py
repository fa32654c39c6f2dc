"""Whether a request's rows keep their images: the one decision, taken from the model's kind
(``data.local_kind``: its config) and the request's ``is_dataset_image``, so the preview, the
Check, Start and the worker agree (``VISION.keeps_media`` / ``join_media``, asked for every request).

- A vision-language model and data with images: the rows keep them (``rows``).
- A text-only model and data with images: refused by file and row (``media.refuse_media``), naming
  vision models to pick instead.
- ``is_dataset_image`` on: the model must be a vision model and some row must hold an image;
  off: rows with images are refused as for a text-only model.
"""

from __future__ import annotations

from typing import Any

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.kinds.vision.rows import has_images


def reads_images(request: Any, dataset: datasets.Dataset, reads: bool) -> bool:
    """True when this source's images are to be kept: it has some, the model reads images
    (``reads``) and ``is_dataset_image`` is not off. Raises DatasetError naming
    ``is_dataset_image`` when it is on and the model is text-only (or not here yet)."""
    if request.is_dataset_image is False:
        return False
    if request.is_dataset_image and not reads:
        raise DatasetError(
            f"is_dataset_image: it is on, but {request.model_name} is not a vision-language model on this machine: "
            "choose one (e.g. Qwen/Qwen2-VL-2B-Instruct, HuggingFaceTB/SmolVLM-256M-Instruct) or turn it off",
            fields=("is_dataset_image",),
        )
    return reads and has_images(dataset)


def with_image_columns(normalised: list[tuple[str, datasets.Dataset, Any]], request: Any) -> list[tuple]:
    """The normalised sources of one split, given an empty ``images`` column where another source of
    the split has images (a vision run may mix text rows in). Raises DatasetError naming
    ``is_dataset_image`` when it is on and no source has images."""
    with_images = any("images" in dataset.column_names for _, dataset, _ in normalised)
    if request.is_dataset_image and not with_images:
        raise DatasetError(
            "is_dataset_image: it is on, but no row of the data holds an image (an images column, a Hub Image column "
            "or image content parts): give image data or leave it empty",
            fields=("is_dataset_image",),
        )
    if not with_images:
        return normalised
    out = []
    for name, dataset, fmt in normalised:
        if "images" not in dataset.column_names and "messages" in dataset.column_names:
            dataset = dataset.add_column("images", [[] for _ in range(len(dataset))])
        out.append((name, dataset, fmt))
    return out
