"""Whether a request's rows keep their audio clips for an audio-in chat model: the one decision,
taken from the model's kind (its config) and the request's ``is_dataset_audio``, so the preview,
the Check, Start and the worker agree (``AUDIO_CHAT.keeps_media`` / ``join_media``, asked for
every request).

- An audio-in chat model and data with audio: the rows keep it (``rows``).
- A model that reads no audio and data with audio: refused by file and row (``data.media``), naming
  the audio models to pick instead.
- ``is_dataset_audio`` on: the model must read audio (this kind or another that does) and some row
  must hold a clip; off: rows with audio are refused as for a text-only model.
"""

from __future__ import annotations

from typing import Any

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.kinds.audio_chat.rows import has_audio


def reads_audio(request: Any, dataset: datasets.Dataset, kind: Any, this: Any) -> bool:
    """True when this source's clips are kept as audio chat rows: it has some, the model's ``kind``
    is ``this`` (the audio chat kind) and ``is_dataset_audio`` is not off. Raises DatasetError
    naming ``is_dataset_audio`` when it is on and the model reads no audio (or is not here yet)."""
    if request.is_dataset_audio is False:
        return False
    if request.is_dataset_audio and "audio" not in kind.media:
        raise DatasetError(
            f"is_dataset_audio: it is on, but {request.model_name} reads no audio on this machine: choose a model "
            f"that does ({this.suggestion}) or turn it off",
            fields=("is_dataset_audio",),
        )
    return kind is this and has_audio(dataset)


def with_audio_columns(normalised: list[tuple[str, datasets.Dataset, Any]], request: Any) -> list[tuple]:
    """The normalised sources of one split, given an empty ``audios`` column where another
    conversation source of the split has clips (an audio chat run may mix text rows in)."""
    if not any("audios" in dataset.column_names for _, dataset, _ in normalised):
        return normalised
    out = []
    for name, dataset, fmt in normalised:
        if "audios" not in dataset.column_names and "messages" in dataset.column_names:
            dataset = dataset.add_column("audios", [[] for _ in range(len(dataset))])
        out.append((name, dataset, fmt))
    return out
