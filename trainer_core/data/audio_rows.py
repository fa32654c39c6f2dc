"""The audio clips training rows name, found and checked by file and row before a run starts.

Where rows carry clips (each a path relative to the data file, a ``data:audio/...`` URL or Hub
``Audio`` bytes):
- an ``audios`` list column (LLaMA-Factory's ``mllm_audio_demo.json``, with ``<audio>`` markers);
- a Hub ``Audio`` feature column, or an ``audio`` column of clips (speech-to-text data:
  ``media.media_columns``);
- OpenAI ``input_audio`` content parts in the turns (``{"type": "input_audio", "input_audio":
  {"data": <base64>, "format": "wav"}}``; also ``audio`` / ``audio_url`` parts naming a path or URL).

``checked_clips`` passes every clip through the one audio opener (``data.audio``: the path check,
the header read, a decode of the first ``DECODE_CLIPS``) and refuses, naming the file and the row, a
missing, unreadable or disallowed clip, a ``data:`` URL that is not audio, and clips longer than
``max_audio_seconds``. ``has_audio`` is the data's side of ``is_dataset_audio`` (and of the kinds'
``holds_media``), ``audio_switch`` the one decision on it (``source_switch`` its part for one source).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.media import media_columns
from trainer_core.data.media_rows import TURN_COLUMNS, column_references, has_parts, parts_of
from trainer_core.model_kind import way_out

PART_TYPES = ("input_audio", "audio", "audio_url")  # content parts that carry a clip
DECODE_CLIPS = 64  # clips decoded whole by the check (the rest: header only; ~5 ms a clip here)
LISTED = 5  # rows a refusal of long clips lists


@dataclass(frozen=True)
class Clip:
    """One checked clip: its 1-based file ``row``, ``name`` (file name, or "(data: URL)"),
    ``reference`` (the opener's canonical form), ``seconds``, the file's ``sampling_rate`` (Hz) and
    ``channels``."""

    row: int
    name: str
    reference: str
    seconds: float
    sampling_rate: int
    channels: int


@dataclass
class ClipStats:
    """The clips of the rows checked: ``clips`` in row order, ``rows`` rows read, and per row its
    clips' canonical references (``references[i]`` for the i-th row read)."""

    clips: list[Clip] = field(default_factory=list)
    rows: int = 0
    references: list[list[str]] = field(default_factory=list)

    @property
    def total_seconds(self) -> float:
        """Seconds of audio in all the clips."""
        return sum(clip.seconds for clip in self.clips)

    @property
    def longest(self) -> Optional[Clip]:
        """The longest clip (None without clips)."""
        return max(self.clips, key=lambda clip: clip.seconds, default=None)

    def over(self, max_seconds: Optional[float]) -> list[Clip]:
        """The clips longer than ``max_seconds`` (none when it is None)."""
        return [clip for clip in self.clips if max_seconds and clip.seconds > max_seconds]

    def add(self, other: ClipStats) -> None:
        """Take ``other``'s clips and rows in (the next source)."""
        self.clips += other.clips
        self.rows += other.rows
        self.references += other.references


def part_reference(part: Any) -> Any:
    """The clip an audio content part names, as ``resolve_audio`` takes it: an ``input_audio``
    part's ``data:audio/<format>;base64,`` URL (``audio.input_audio_url``), an ``audio`` /
    ``audio_url`` part's path or URL (a string, or a dict's ``url`` / ``path``); None for another
    part. Raises RowError for an ``input_audio`` part without base64 data or with a format that is
    not audio."""
    if not isinstance(part, dict) or part.get("type") not in PART_TYPES:
        return None
    if part["type"] == "input_audio":
        from trainer_core.data.audio import input_audio_url

        return input_audio_url(part)
    value = part.get(part["type"], part.get("audio", part.get("audio_url")))
    return value.get("url") or value.get("path") if isinstance(value, dict) else value


def clip_reference(value: Any) -> Any:
    """A clip a row names, as ``resolve_audio`` takes it: an audio content part's reference
    (``part_reference``), any other value (a path, a URL, Hub ``Audio`` bytes) as it is. Raises
    RowError as ``part_reference``."""
    is_part = isinstance(value, dict) and value.get("type") in PART_TYPES
    return part_reference(value) if is_part else value


def clip_columns(dataset: datasets.Dataset) -> list[str]:
    """The columns of ``dataset`` that hold clips (``audios`` lists, Hub ``Audio`` features, an
    ``audio`` column of clips)."""
    return [name for name, kind in media_columns(dataset).items() if kind == "audio"]


def row_references(dataset: datasets.Dataset) -> list[list[Any]]:
    """Per row of ``dataset``, the clips it names as written (column values, then its audio content
    parts, as dicts, in turn order); Hub ``Audio`` columns read undecoded (``{"bytes", "path"}``)."""
    found = column_references(dataset, clip_columns(dataset))
    for column, key in TURN_COLUMNS.items():
        if column in dataset.column_names:
            for index, turns in enumerate(dataset[column]):
                found[index].extend(part for turn in turns or [] for part in parts_of(turn, key, PART_TYPES))
    return found


def has_audio(dataset: datasets.Dataset) -> bool:
    """True when ``dataset`` has a clip column or one of its first 1,000 rows has an audio content
    part (``media_rows.has_parts``): the data's side of ``is_dataset_audio``."""
    return bool(clip_columns(dataset)) or has_parts(dataset, PART_TYPES)


def checked_clips(
    dataset: datasets.Dataset,
    source: str,
    base: Optional[Path],
    roots: Iterable[Path],
    max_seconds: Optional[float],
    first_row: int = 1,
    decode: int = DECODE_CLIPS,
) -> ClipStats:
    """Every clip of ``dataset``'s rows through the audio opener: resolved (``base``: the data
    file's folder; ``roots``: the allowed folders), its header read, the first ``decode`` clips
    decoded whole. Raises DatasetError naming ``source`` and the file row (``first_row`` is
    ``dataset[0]``'s) for a missing, unreadable or disallowed clip or a ``data:`` URL that is not
    audio; and one naming ``max_audio_seconds`` and the rows for clips longer than ``max_seconds``."""
    from trainer_core.data.audio import audio_info, read_audio, resolve_audio

    roots, stats = list(roots), ClipStats(rows=len(dataset))
    for index, references in enumerate(row_references(dataset)):
        row, resolved = first_row + index, []
        try:
            for reference in references:
                canonical = resolve_audio(clip_reference(reference), base, roots)
                info = audio_info(canonical)
                if len(stats.clips) < decode and not (max_seconds and info.seconds > max_seconds):
                    read_audio(canonical, info.sampling_rate)  # a damaged body is refused now, not mid-run
                resolved.append(canonical)
                stats.clips.append(
                    Clip(row, clip_name(canonical), canonical, info.seconds, info.sampling_rate, info.channels)
                )
        except RowError as exc:
            raise DatasetError(f"{source}, row {row}: {exc}") from None
        stats.references.append(resolved)
    refuse_long(stats.over(max_seconds), source, max_seconds)
    return stats


def refuse_long(long: list[Clip], source: str, max_seconds: Optional[float]) -> None:
    """Raise DatasetError (field ``max_audio_seconds``) listing the first rows of ``long`` clips."""
    if not long:
        return
    listed = ", ".join(f"row {clip.row} ({clip.name}, {clip.seconds:.1f} s)" for clip in long[:LISTED])
    more = f" and {len(long) - LISTED} more" if len(long) > LISTED else ""
    raise DatasetError(
        f"{source}: {len(long)} clip(s) longer than max_audio_seconds ({max_seconds:g} s): {listed}{more}. Cut them "
        "into shorter clips, remove those rows, or raise max_audio_seconds",
        fields=("max_audio_seconds",),
    )


def source_switch(is_dataset_audio: Optional[bool], with_audio: bool, reads: bool, model_name: str) -> bool:
    """Whether one source's rows keep their clips: it holds some (``with_audio``), the model reads
    audio (``reads``) and ``is_dataset_audio`` is not off. Raises DatasetError (field
    ``is_dataset_audio``) when it is on and the model reads no audio, and when it is off for a model
    that reads audio and the source holds clips (they would be dropped from their rows). Off, or
    not set, for a model that reads no audio: False, and such rows are refused as text
    (``media.refuse_media``)."""
    if is_dataset_audio and not reads:
        raise DatasetError(
            f"is_dataset_audio: it is on, but {model_name} reads no audio (or is not on this machine): "
            f"{way_out('audio')}, or turn it off",
            fields=("is_dataset_audio", "model_name"),
        )
    if is_dataset_audio is False and with_audio and reads:
        raise DatasetError(
            "is_dataset_audio: it is off, but the data holds audio clips: remove them (the audios / audio column and "
            "the <audio> markers) to train on the text alone, or leave it empty",
            fields=("is_dataset_audio",),
        )
    return with_audio and reads


def audio_switch(is_dataset_audio: Optional[bool], with_audio: bool, reads: bool, model_name: str) -> bool:
    """``source_switch`` over the whole data (``with_audio``: some source holds clips); raises
    DatasetError (field ``is_dataset_audio``) as it does, and when the switch is on and no row holds
    a clip."""
    keeps = source_switch(is_dataset_audio, with_audio, reads, model_name)
    if is_dataset_audio and not with_audio:
        raise DatasetError(
            "is_dataset_audio: it is on, but no row of the data holds an audio clip (an audios or audio column, a "
            "Hub Audio column or input_audio content parts): give audio data or leave it empty",
            fields=("is_dataset_audio",),
        )
    return keeps


def detected_words(is_dataset_audio: Optional[bool], with_audio: bool) -> str:
    """How the check and the preview report the switch beside the data: "is_dataset_audio: found
    from the data (yes)", or "is_dataset_audio: on (set)"."""
    if is_dataset_audio is None:
        return f"is_dataset_audio: found from the data ({'yes' if with_audio else 'no'})"
    return f"is_dataset_audio: {'on' if is_dataset_audio else 'off'} (set)"


def clip_name(reference: str) -> str:
    """A clip's name for people: its file name, or "(data: URL)"."""
    return "(data: URL)" if reference.startswith("data:") else Path(reference).name
