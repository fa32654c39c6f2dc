"""Whether a request's rows keep their audio clips for an audio-in chat model: the one decision,
taken from the model's kind (its config) and the request's ``is_dataset_audio``, so the preview,
the Check, Start and the worker agree (``AUDIO_CHAT.keeps_media`` / ``join_media``, asked for
every request).

- An audio-in chat model and data with audio: the rows keep it (``rows``).
- A model that reads no audio and data with audio: refused by file and row (``data.media``), naming
  the audio models to pick instead.
- ``is_dataset_audio`` (``data.audio_rows.source_switch``, the Check's rule too): on, the model
  must read audio (this kind or another that does); off, an audio model's rows must hold no clip.
"""

from __future__ import annotations

from typing import Any

import datasets

from trainer_core.data.audio_rows import has_audio, source_switch


def reads_audio(request: Any, dataset: datasets.Dataset, kind: Any, this: Any) -> bool:
    """True when this source's clips are kept as audio chat rows: the model's ``kind`` is ``this``
    (the audio chat kind) and ``data.audio_rows.source_switch`` keeps them (the source holds clips,
    ``is_dataset_audio`` is not off). Raises DatasetError naming ``is_dataset_audio`` as it does:
    on for a model that reads no audio, off for an audio model and a source with clips."""
    keeps = source_switch(request.is_dataset_audio, has_audio(dataset), "audio" in kind.media, request.model_name)
    return keeps and kind is this


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
