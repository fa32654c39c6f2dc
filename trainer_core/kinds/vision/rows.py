"""Training rows with images, in canonical form: ``messages`` (turns whose text holds one
``<image>`` marker where each image goes) and ``images`` (one canonical reference per marker, in
order: ``images.resolve_reference``).

The layouts people bring:
- LLaMA-Factory / ShareGPT: ``messages`` or ``conversations`` with ``<image>`` markers and an
  ``images`` list of paths relative to the data file (``mllm_demo.json``);
- OpenAI content parts: ``{"type": "image_url", "image_url": {"url": <path or data: URL>}}`` (or
  ``{"type": "image", "image": ...}``) inside a turn's content; each becomes a marker where it stood;
- a Hugging Face dataset with an ``Image`` column (one image or a list), usually without markers:
  a row without any marker gets its images at the start of its first user turn (TRL's
  ``prepare_multimodal_messages`` does the same).

Each row is checked when it is read, so the Check and Start refuse it by file and row: every image
passes the path check and opens within the pixel limit, and a row with markers has exactly as many
markers as images. Audio and video stay refused (``data.media``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.formats import MESSAGE_FEATURES, normalize_with_notes
from trainer_core.data.images import MARKER, check_image, resolve_reference
from trainer_core.data.media import media_columns, refuse_media
from trainer_core.data.media_rows import column_references, has_parts, lift_parts, place_markers
from trainer_core.data.tool_rows import TOOLS, in_system
from trainer_core.vocabulary import FormatType

IMAGE_PART_TYPES = ("image_url", "image", "input_image")
VISION_FEATURES = datasets.Features({**MESSAGE_FEATURES, "images": datasets.List(datasets.Value("string"))})


def image_columns(dataset: datasets.Dataset) -> list[str]:
    """The columns of ``dataset`` that hold images (``images`` lists, Hub ``Image`` features)."""
    return [name for name, kind in media_columns(dataset).items() if kind == "image"]


def has_images(dataset: datasets.Dataset) -> bool:
    """True when ``dataset`` has an image column or a turn with an image content part (first 1,000
    rows looked at for parts)."""
    return bool(image_columns(dataset)) or has_parts(dataset, IMAGE_PART_TYPES)


def normalize_vision(
    dataset: datasets.Dataset,
    fmt: FormatType,
    source: str,
    base: Optional[Path],
    roots: Iterable[Path],
    first_row: int = 1,
) -> tuple[datasets.Dataset, list[str]]:
    """Canonical vision rows (columns ``messages`` and ``images``, ``VISION_FEATURES``) of one source
    and the notes of ``formats.normalize_with_notes``. ``base``: the folder relative image paths are
    read from (the data file's); ``roots``: the allowed folders. Raises DatasetError naming
    ``source`` and the file row for a missing, unreadable, oversized or disallowed image, a marker
    count that differs from the image count, a row with audio or video, and whatever the text
    layout refuses."""
    roots = list(roots)
    columns = image_columns(dataset)
    references = column_references(dataset, columns)
    text_only = dataset.remove_columns(columns)
    refuse_media(text_only, source, first_row, reads="images and text")  # audio and video
    part_refs, text_only = lift_parts(text_only, IMAGE_PART_TYPES, _part_reference, MARKER)
    canonical, notes = normalize_with_notes(text_only, fmt, source, first_row)
    rows_images: list[list[str]] = []
    messages_out = []
    for index, (messages, tools) in enumerate(zip(canonical["messages"], canonical[TOOLS])):
        messages = in_system(messages, tools)  # the processor's template gets no tools=: the fallback block
        row = first_row + index
        try:
            refs = [resolve_reference(ref, base, roots) for ref in references[index] + part_refs[index]]
            for ref in refs:
                check_image(ref)
            messages = place_markers(messages, len(refs), MARKER, "image")
        except RowError as exc:
            raise DatasetError(f"{source}, row {row}: {exc}") from None
        messages_out.append(messages)
        rows_images.append(refs)
    rows = datasets.Dataset.from_dict({"messages": messages_out, "images": rows_images}, features=VISION_FEATURES)
    return rows, notes


def _part_reference(part: dict[str, Any]) -> Any:
    """The path / URL an image content part names (OpenAI's ``image_url.url``, or ``image`` / ``url``)."""
    value = part.get("image_url") if part.get("type") == "image_url" else part.get("image", part.get("image_url"))
    if isinstance(value, dict):
        value = value.get("url") or value.get("path")
    return value if value is not None else part.get("url") or part.get("path")
