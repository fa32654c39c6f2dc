"""Rows that carry images, audio or video, found before a text-only model is trained on them.

The layouts people bring media in:
- LLaMA-Factory's and ShareGPT's list columns ``images`` / ``videos`` / ``audios`` of paths, with
  ``<image>`` / ``<video>`` / ``<audio>`` markers in the turns (``mllm_demo.json``);
- a Hugging Face dataset with an ``Image``, ``Audio`` or ``Video`` feature column;
- OpenAI-style content parts (``{"type": "image_url", ...}``), refused where turns are made text
  (``text_values.content_text``).

A text-only model would train such a row with its markers left in as text and its pictures never
seen. It is refused by file and row instead, with the way out: the model kind that reads the
medium (``model_kind.reader_of``: an image-and-text model for images), where there is one.
"""

from __future__ import annotations

from typing import Any

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.model_kind import reader_of

MEDIA_COLUMNS = {"images": "image", "videos": "video", "audios": "audio"}  # column -> kind
MEDIA_FEATURES = {"Image": "image", "Audio": "audio", "Video": "video"}  # datasets feature type -> kind


def media_columns(dataset: datasets.Dataset) -> dict[str, str]:
    """The columns of ``dataset`` that hold media: ``{column: "image" | "audio" | "video"}``, from
    the LLaMA-Factory / ShareGPT column names and from ``datasets`` feature types."""
    found = {name: kind for name, kind in MEDIA_COLUMNS.items() if name in dataset.column_names}
    for name, feature in dataset.features.items():
        kind = MEDIA_FEATURES.get(type(feature).__name__)
        if kind:
            found[name] = kind
    return found


def _count(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, (list, tuple)):
        return sum(1 for item in value if item not in (None, ""))
    return 0 if value == "" else 1


def refuse_media(dataset: datasets.Dataset, source: str, first_row: int = 1) -> None:
    """Raise DatasetError naming ``source``, the first row (1-based file row, ``first_row`` being
    ``dataset[0]``'s) that holds an image, audio clip or video, its column and count, and the way
    out; return None when no row does (an empty ``images`` list is text data)."""
    columns = media_columns(dataset)
    if not columns:
        return
    for index, row in enumerate(dataset.select_columns(list(columns)).iter(batch_size=1)):
        for name, kind in columns.items():
            count = _count(row[name][0])
            if count:
                plural = f"{count} {kind}s" if count != 1 else f"1 {kind}"
                reader = reader_of(kind)  # the model kind whose rows carry this medium
                way_out = f"choose {reader.suggestion}" if reader is not None else f"{kind} is not trained here"
                raise DatasetError(
                    f"{source}, row {first_row + index}: it holds {plural} (column {name!r}), and this model reads "
                    f"text only: the {kind}s would never be seen and their <{kind}> markers would be trained as "
                    f"text. Remove the column {name!r} and the <{kind}> markers to train on the text alone, or "
                    f"{way_out}"
                )
