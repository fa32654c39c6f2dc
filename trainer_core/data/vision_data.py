"""Whether a request's rows keep their images: the one decision, taken from the model's config
(``models.vision_family``) and the request's ``is_dataset_image``, so the preview, the Check,
Start and the worker agree.

- A vision-language model and data with images: the rows keep them (``image_rows``).
- A text-only model and data with images: refused by file and row (``media.refuse_media``), naming
  vision models to pick instead.
- ``is_dataset_image`` on: the model must be a vision model and some row must hold an image;
  off: rows with images are refused as for a text-only model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.data.image_rows import has_images
from trainer_core.data.preview_tokenizer import local_model_folder
from trainer_core.models import hub
from trainer_core.models.vision_family import VisionFamily, folder_family


def named_family(model_name: Any, settings: Any = None) -> Optional[VisionFamily]:
    """``folder_family`` of the model ``model_name`` names, where it is on this machine (a folder in
    the allowed folders, the Hub cache, the bundled default: ``preview_tokenizer.local_model_folder``);
    None when it is text-only, empty or not here yet (the worker decides again once it has the
    model). ``settings``: the app's (default: ``get_settings()``)."""
    from trainer_core.settings import get_settings

    if not isinstance(model_name, str) or not model_name.strip():
        return None
    return folder_family(local_model_folder(model_name.strip(), settings or get_settings()))


def model_family(request: Any) -> Optional[VisionFamily]:
    """The vision family of the request's model where it is on this machine, else None
    (``checked_family``)."""
    return checked_family(request.model_name)


def checked_family(model_name: str) -> Optional[VisionFamily]:
    """``named_family`` for a model name a door has already checked: a folder path is read as it is
    (Start's admission and the pre-flight confine ``model_name``: ``hub.check_model``; the worker
    and evaluation read a run's admitted request)."""
    name = model_name.strip()
    if hub.looks_like_path(name):
        return folder_family(Path(name).expanduser())
    return named_family(name)


def reads_images(request: Any, dataset: datasets.Dataset, vision: Optional[bool] = None) -> bool:
    """True when this source's images are to be kept: it has some, the model reads images
    (``vision``; None: ``model_family``) and ``is_dataset_image`` is not off. Raises DatasetError
    naming ``is_dataset_image`` when it is on and the model is text-only (or not here yet)."""
    if request.is_dataset_image is False:
        return False
    reads = model_family(request) is not None if vision is None else vision
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
