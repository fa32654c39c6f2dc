"""The audio clips training rows name, found and checked by file and row before a run starts.

Where rows carry clips (each a path relative to the data file, a ``data:audio/...`` URL or Hub
``Audio`` bytes):
- an ``audios`` list column (LLaMA-Factory's ``mllm_audio_demo.json``, with ``<audio>`` markers);
- a Hub ``Audio`` feature column, or an ``audio`` column of clips (speech-to-text data:
  ``media.media_columns``);
- OpenAI ``input_audio`` content parts in the turns (``{"type": "input_audio", "input_audio":
  {"data": <base64>, "format": "wav"}}``; also ``audio_url`` parts).

``checked_clips`` passes every clip through the one audio opener (``data.audio``: the path check,
the header read, a decode of the first ``DECODE_CLIPS``) and refuses, naming the file and the row, a
missing, unreadable or disallowed clip, a ``data:`` URL that is not audio, and clips longer than
``max_audio_seconds``. ``audio_switch`` is the one decision on ``is_dataset_audio``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.media import media_columns
from trainer_core.model_kind import way_out

PART_TYPES = ("input_audio", "audio_url")  # content parts that carry a clip
TURN_COLUMNS = {"messages": "content", "conversations": "value"}  # turn list column -> its content key
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
    part's ``data:audio/<format>;base64,`` URL (``audio.input_audio_url``), an ``audio_url`` part's
    ``url``; None for another part. Raises RowError for an ``input_audio`` part without base64
    data or with a format that is not audio."""
    if not isinstance(part, dict) or part.get("type") not in PART_TYPES:
        return None
    if part["type"] == "input_audio":
        from trainer_core.data.audio import input_audio_url

        return input_audio_url(part)
    value = part.get("audio_url")
    return value.get("url") if isinstance(value, dict) else value


def clip_columns(dataset: datasets.Dataset) -> list[str]:
    """The columns of ``dataset`` that hold clips (``audios`` lists, Hub ``Audio`` features, an
    ``audio`` column of clips)."""
    return [name for name, kind in media_columns(dataset).items() if kind == "audio"]


def row_references(dataset: datasets.Dataset) -> list[list[Any]]:
    """Per row of ``dataset``, the clips it names as written (column values, then its audio content
    parts, as dicts, in turn order); Hub ``Audio`` columns read undecoded (``{"bytes", "path"}``)."""
    found: list[list[Any]] = [[] for _ in range(len(dataset))]
    for name in clip_columns(dataset):
        feature = dataset.features[name]
        undecoded = _undecoded(feature)
        values = (dataset if undecoded is feature else dataset.cast_column(name, undecoded))[name]
        for index, value in enumerate(values):
            items = value if isinstance(value, list) else [value]
            found[index].extend(item for item in items if item not in (None, ""))
    for column, key in TURN_COLUMNS.items():
        if column in dataset.column_names:
            for index, turns in enumerate(dataset[column]):
                found[index].extend(_turn_parts(turns, key))
    return found


def has_audio(dataset: datasets.Dataset, look_at: int = 1000) -> bool:
    """True when ``dataset`` has a clip column or one of its first ``look_at`` rows has an audio
    content part: the data's side of ``is_dataset_audio``."""
    if clip_columns(dataset):
        return True
    for column, key in TURN_COLUMNS.items():
        if column in dataset.column_names:
            for turns in dataset.select(range(min(len(dataset), look_at)))[column]:
                if _turn_parts(turns, key):
                    return True
    return False


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
                if isinstance(reference, dict) and reference.get("type") in PART_TYPES:  # a content part
                    reference = part_reference(reference)
                canonical = resolve_audio(reference, base, roots)
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


def audio_switch(is_dataset_audio: Optional[bool], with_audio: bool, reads: bool, model_name: str) -> bool:
    """Whether the rows keep their clips: the data holds some (``with_audio``), the model reads
    audio (``reads``) and ``is_dataset_audio`` is not off. Raises DatasetError (field
    ``is_dataset_audio``) when it is on and the model reads no audio or the data holds none, and
    when it is off and the data holds clips (they would be dropped from their rows)."""
    if is_dataset_audio and not reads:
        raise DatasetError(
            f"is_dataset_audio: it is on, but {model_name} reads no audio (or is not on this machine): "
            f"{way_out('audio')}, or turn it off",
            fields=("is_dataset_audio", "model_name"),
        )
    if is_dataset_audio and not with_audio:
        raise DatasetError(
            "is_dataset_audio: it is on, but no row of the data holds an audio clip (an audios or audio column, a "
            "Hub Audio column or input_audio content parts): give audio data or leave it empty",
            fields=("is_dataset_audio",),
        )
    if is_dataset_audio is False and with_audio:
        raise DatasetError(
            "is_dataset_audio: it is off, but the data holds audio clips: remove them (the audios / audio column and "
            "the <audio> markers) to train on the text alone, or leave it empty",
            fields=("is_dataset_audio",),
        )
    return with_audio and reads


def detected_words(is_dataset_audio: Optional[bool], with_audio: bool) -> str:
    """How the check and the preview report the switch beside the data: "is_dataset_audio: found
    from the data (yes)", or "is_dataset_audio: on (set)"."""
    if is_dataset_audio is None:
        return f"is_dataset_audio: found from the data ({'yes' if with_audio else 'no'})"
    return f"is_dataset_audio: {'on' if is_dataset_audio else 'off'} (set)"


def clip_name(reference: str) -> str:
    """A clip's name for people: its file name, or "(data: URL)"."""
    return "(data: URL)" if reference.startswith("data:") else Path(reference).name


def _turn_parts(turns: Any, key: str) -> list[dict]:
    """The audio content parts of a row's turns (a list of turn dicts), in order."""
    found = []
    for turn in turns or []:
        content = turn.get(key) if isinstance(turn, dict) else None
        if isinstance(content, list):
            found.extend(part for part in content if isinstance(part, dict) and part.get("type") in PART_TYPES)
    return found


def _undecoded(feature: Any) -> Any:
    """A Hub ``Audio`` feature (or a list of them) that yields ``{"bytes", "path"}`` undecoded."""
    if type(feature).__name__ == "Audio":
        return datasets.Audio(decode=False)
    inner = getattr(feature, "feature", None)
    if inner is not None and type(inner).__name__ == "Audio":
        return datasets.List(datasets.Audio(decode=False))
    return feature
