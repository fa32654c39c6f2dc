"""Training rows with audio clips, in canonical form: ``messages`` (turns whose text holds one
``<audio>`` marker where each clip goes) and ``audios`` (one canonical reference per marker, in
order: ``data.audio.resolve_audio``: an absolute confined path or a ``data:`` URL).

The layouts people bring:
- LLaMA-Factory: ``messages`` (or ``conversations``) with ``<audio>`` markers and an ``audios`` list
  of paths relative to the data file (``mllm_audio_demo.json``);
- OpenAI content parts: ``{"type": "input_audio", "input_audio": {"data": <base64>, "format":
  "wav"}}`` (or ``{"type": "audio", "audio": <path>}`` / ``"audio_url"``) inside a turn's content;
  each becomes a marker where it stood;
- a Hugging Face dataset with an ``Audio`` column (one clip or a list), usually without markers: a
  row without any marker gets its clips at the start of its first user turn.

Each row is checked when it is read, so the Check and Start refuse it by file and row: every clip
passes the path check and its header reads as audio, and a row with markers has exactly as many
markers as clips. Images and video in the same rows stay refused (``data.media``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.audio import MARKER, audio_info, input_audio_url, resolve_audio
from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.formats import MESSAGE_FEATURES, normalize_with_notes
from trainer_core.data.media import media_columns, refuse_media
from trainer_core.data.media_rows import column_references, has_parts, lift_parts, place_markers
from trainer_core.vocabulary import FormatType

AUDIO_PART_TYPES = ("input_audio", "audio", "audio_url")
AUDIO_CHAT_FEATURES = datasets.Features({**MESSAGE_FEATURES, "audios": datasets.List(datasets.Value("string"))})


def audio_columns(dataset: datasets.Dataset) -> list[str]:
    """The columns of ``dataset`` that hold audio (``audios`` lists, Hub ``Audio`` features)."""
    return [name for name, kind in media_columns(dataset).items() if kind == "audio"]


def has_audio(dataset: datasets.Dataset) -> bool:
    """True when ``dataset`` has an audio column or a turn with an audio content part (first 1,000
    rows looked at for parts)."""
    return bool(audio_columns(dataset)) or has_parts(dataset, AUDIO_PART_TYPES)


def part_reference(part: dict[str, Any]) -> Any:
    """What an audio content part names: an OpenAI ``input_audio`` part as it is (made a ``data:`` URL
    by ``audio.input_audio_url`` inside the row's checks, so its refusal names the row); else the
    path / URL in ``audio`` / ``audio_url`` (a string, or a dict with ``url`` / ``path``)."""
    if part.get("type") == "input_audio":
        return part
    value = part.get(part["type"]) if part.get("type") in part else part.get("audio", part.get("audio_url"))
    if isinstance(value, dict):
        value = value.get("url") or value.get("path")
    return value


def _reference(ref: Any) -> Any:
    """An ``input_audio`` part's ``data:`` URL (RowError when malformed); any other reference as it is."""
    return input_audio_url(ref) if isinstance(ref, dict) and ref.get("type") == "input_audio" else ref


def normalize_audio_chat(
    dataset: datasets.Dataset,
    fmt: FormatType,
    source: str,
    base: Optional[Path],
    roots: Iterable[Path],
    first_row: int = 1,
) -> tuple[datasets.Dataset, list[str]]:
    """Canonical audio chat rows (columns ``messages`` and ``audios``, ``AUDIO_CHAT_FEATURES``) of one
    source and the notes of ``formats.normalize_with_notes``. ``base``: the folder relative clip
    paths are read from (the data file's); ``roots``: the allowed folders. Raises DatasetError naming
    ``source`` and the file row for a missing, unreadable or disallowed clip, a marker count that
    differs from the clip count, a row with images or video, and whatever the text layout refuses."""
    roots = list(roots)
    columns = audio_columns(dataset)
    references = column_references(dataset, columns)
    text_only = dataset.remove_columns(columns)
    refuse_media(text_only, source, first_row)  # images and video
    part_refs, text_only = lift_parts(text_only, AUDIO_PART_TYPES, part_reference, MARKER)
    canonical, notes = normalize_with_notes(text_only, fmt, source, first_row)
    rows_audios: list[list[str]] = []
    messages_out = []
    for index, messages in enumerate(canonical["messages"]):
        try:
            refs = [resolve_audio(_reference(ref), base, roots) for ref in references[index] + part_refs[index]]
            for ref in refs:
                audio_info(ref)  # the header: an unreadable or non-audio file is refused here
            messages = place_markers(messages, len(refs), MARKER, "audio clip")
        except RowError as exc:
            raise DatasetError(f"{source}, row {first_row + index}: {exc}") from None
        messages_out.append(messages)
        rows_audios.append(refs)
    rows = datasets.Dataset.from_dict({"messages": messages_out, "audios": rows_audios}, features=AUDIO_CHAT_FEATURES)
    return rows, notes
