"""Rows that carry images, audio or video, found before a text-only model is trained on them.

The layouts people bring media in:
- LLaMA-Factory's and ShareGPT's list columns ``images`` / ``videos`` / ``audios`` of paths, with
  ``<image>`` / ``<video>`` / ``<audio>`` markers in the turns (``mllm_demo.json``);
- a Hugging Face dataset with an ``Image``, ``Audio`` or ``Video`` feature column;
- an ``audio`` column of clips (paths ending in an audio extension, ``data:audio/`` URLs, Hub
  ``{"bytes", "path"}`` dicts), as speech-to-text data names them;
- OpenAI-style content parts (``{"type": "image_url", ...}``), refused where turns are made text
  (``text_values.content_text``).

A text-only model would train such a row with its markers left in as text and its pictures never
seen. It is refused by file and row instead, with the way out: the model kind that reads the
medium (``model_kind.way_out``: an image-and-text model for images; every kind that reads audio
for audio), where there is one.
"""

from __future__ import annotations

from typing import Any

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.model_kind import way_out

MEDIA_COLUMNS = {"images": "image", "videos": "video", "audios": "audio"}  # column -> kind
MEDIA_FEATURES = {"Image": "image", "Audio": "audio", "Video": "video"}  # datasets feature type -> kind
NOUNS = {"image": "image", "audio": "audio clip", "video": "video"}
CLIP_COLUMN = "audio"  # one clip a row (speech-to-text data), when its values are clips
AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg")  # what the audio opener reads (soundfile)
LOOKED_AT = 20  # rows whose ``audio`` values decide whether the column holds clips


def media_columns(dataset: datasets.Dataset) -> dict[str, str]:
    """The columns of ``dataset`` that hold media: ``{column: "image" | "audio" | "video"}``, from
    the LLaMA-Factory / ShareGPT column names and from ``datasets`` feature types."""
    found = {name: kind for name, kind in MEDIA_COLUMNS.items() if name in dataset.column_names}
    for name, feature in dataset.features.items():
        kind = MEDIA_FEATURES.get(type(feature).__name__)
        if kind:
            found[name] = kind
    if CLIP_COLUMN in dataset.column_names and CLIP_COLUMN not in found:
        if any(is_clip(value) for value in dataset.select(range(min(LOOKED_AT, len(dataset))))[CLIP_COLUMN]):
            found[CLIP_COLUMN] = "audio"
    return found


def is_clip(value: Any) -> bool:
    """True when ``value`` names an audio clip: a path ending in an audio extension
    (``AUDIO_EXTENSIONS``), a ``data:audio/`` URL, or a Hub Audio ``{"bytes", "path"}`` dict."""
    if isinstance(value, dict):
        return bool(value.get("bytes")) or is_clip(value.get("path"))
    if not isinstance(value, str):
        return False
    text = value.strip().lower()
    return text.startswith("data:audio/") or text.endswith(AUDIO_EXTENSIONS)


def _count(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, (list, tuple)):
        return sum(1 for item in value if item not in (None, ""))
    return 0 if value == "" else 1


def refuse_media(dataset: datasets.Dataset, source: str, first_row: int = 1, reads: str = "text only") -> None:
    """Raise DatasetError naming ``source``, the first row (1-based file row, ``first_row`` being
    ``dataset[0]``'s) that holds an image, audio clip or video, its column and count, and the way
    out (``model_kind.way_out``: every kind that reads it); return None when no row does (an empty
    ``images`` list is text data). ``reads``: what the model reads, as the message says it."""
    columns = media_columns(dataset)
    if not columns:
        return
    for index, row in enumerate(dataset.select_columns(list(columns)).iter(batch_size=1)):
        for name, kind in columns.items():
            count = _count(row[name][0])
            if count:
                noun = NOUNS[kind]
                plural = f"{count} {noun}s" if count != 1 else f"1 {noun}"
                raise DatasetError(
                    f"{source}, row {first_row + index}: it holds {plural} (column {name!r}), and this model reads "
                    f"{reads}: the {noun}s would never be seen and their <{kind}> markers would be trained as "
                    f"text. Remove the column {name!r} and the <{kind}> markers to train on the text alone, or "
                    f"{way_out(kind)}"
                )
