"""A text-to-speech run's data: (text, audio[, speaker]) rows read from the request's sources
(``data.prepare.source_parts``: JSON / JSONL / CSV / Parquet / a Hub split), each clip resolved once
(``data.audio.resolve_audio``: a confined path relative to the data file, a ``data:`` URL, Hub
``Audio`` bytes) and measured from its header (``audio_info``), the ``val_size`` split, and the
sequence each row makes (text tokens, then one position a codec frame: Mimi's 12.5 a second).

Columns: ``audio`` (or a Hub ``Audio`` column of another name), the text spoken in ``text``,
``transcript`` or ``sentence`` (the first present), and the speaker in ``speaker_column`` (empty: a
``speaker`` column where there is one, else speaker 0); other names are mapped with
``custom_format_mapping``. Rows come out as ``audio`` (the resolved reference), ``text``,
``speaker`` (a whole number) and ``seconds``. A row whose sequence is longer than
``max_seq_length`` is refused, never cut: its speech would end unsaid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.audio_splits import ClipSplits, ClipSplitStats, held_out, refuse_other_rate, train_and_eval
from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.formats import apply_mapping
from trainer_core.data.media import media_columns
from trainer_core.data.prepare import source_parts
from trainer_core.data.preview_cells import KindRows

AUDIO_COLUMN = "audio"
TEXT_COLUMNS = ("text", "transcript", "sentence")  # the text's usual names, first present wins
SPEAKER_COLUMN = "speaker"  # read where the request names no speaker_column
FRAMES_PER_SECOND = 12.5  # Mimi's codec frames a second of audio (CSM's processor counts them so)
FIELDS = ("local_datasets", "custom_format_mapping")
Voice = Callable[[Any, str, str, Optional[str]], Any]  # (value, source, "row N", column or None) -> the row's speaker


class Shape(str, Enum):
    """The layout of a text-to-speech run's rows."""

    utterances = "utterances"  # (text, audio[, speaker])


def _refuse(source: str, message: str, code: str, fields: tuple[str, ...] = FIELDS) -> DatasetError:
    return DatasetError(f"{source}: {message}", fields=fields, code=code)


def frames(seconds: float) -> int:
    """Codec frames of ``seconds`` of audio (Mimi: 12.5 a second, the last one partial)."""
    return math.ceil(seconds * FRAMES_PER_SECOND)


def _columns(dataset: datasets.Dataset, source: str, speaker: Optional[str]) -> tuple[str, str, Optional[str]]:
    """(audio column, text column, speaker column or None) of ``dataset``; raises DatasetError
    naming what it has (``speaker``: the request's ``speaker_column``, which must be there)."""
    names = dataset.column_names
    audio = AUDIO_COLUMN if AUDIO_COLUMN in names else None
    if audio is None:
        audio = next((name for name, kind in media_columns(dataset).items() if kind == "audio"), None)
    text = next((name for name in TEXT_COLUMNS if name in names), None)
    if audio is None or text is None:
        raise _refuse(
            source,
            f"columns {', '.join(names)} make no text-to-speech rows: give an {AUDIO_COLUMN!r} column (a path "
            f"relative to the data file, a data: URL or a Hub Audio column) and the words spoken in one of "
            f"{', '.join(TEXT_COLUMNS)}, or map yours with custom_format_mapping",
            "no_tts_columns",
        )
    if speaker is not None and speaker not in names:
        raise _refuse(
            source,
            f"speaker_column {speaker!r} is not a column here (columns: {', '.join(names)})",
            "speaker_column_missing",
            ("speaker_column", *FIELDS),
        )
    return audio, text, speaker or (SPEAKER_COLUMN if SPEAKER_COLUMN in names else None)


def speaker_number(value: Any, source: str, where: str, column: Optional[str]) -> int:
    """A row's CSM speaker: a whole number from 0 (CSM's voices are numbered; 0 without a speaker
    column); DatasetError otherwise."""
    if column is None:
        return 0
    text = str(value).strip() if value is not None else ""
    if not text.isdigit():
        raise _refuse(
            source,
            f"{where}: column {column} holds {value!r}, not a speaker number: CSM's voices are whole numbers "
            "(0, 1, ...); number your speakers",
            "speaker_not_a_number",
            ("speaker_column", *FIELDS),
        )
    return int(text)


def tts_rows(
    dataset: datasets.Dataset,
    source: str,
    base: Optional[Path],
    roots: list[Path],
    first_row: int,
    request: Any,
    voice: Voice = speaker_number,
) -> datasets.Dataset:
    """``dataset``'s rows as (``audio``, ``text``, ``speaker``, ``seconds``), each row's speaker as
    ``voice`` reads it. Raises DatasetError naming ``source`` and the file row (``first_row`` is
    ``dataset[0]``'s) for a missing text, a clip that cannot be read or found (outside ``base`` /
    ``roots``, not audio), one longer than ``max_audio_seconds``, or a speaker ``voice`` refuses."""
    from trainer_core.data.audio import audio_info, resolve_audio, too_long

    audio_column, text_column, speaker_column = _columns(dataset, source, request.speaker_column)
    if isinstance(dataset.features[audio_column], datasets.Audio):
        dataset = dataset.cast_column(audio_column, datasets.Audio(decode=False))  # the bytes, not decoded
    rows: dict[str, list] = {"audio": [], "text": [], "speaker": [], "seconds": []}
    for index, row in enumerate(dataset):
        where = f"row {first_row + index}"
        text = row[text_column]
        if not isinstance(text, str) or not text.strip():
            raise _refuse(
                source, f"{where}: column {text_column} holds no text: give every clip its words", "text_missing"
            )
        try:
            reference = resolve_audio(row[audio_column], base, roots)
            info = audio_info(reference)
        except RowError as exc:
            raise _refuse(source, f"{where}: {exc}", "audio_unreadable") from None
        if info.seconds > request.max_audio_seconds:
            message = too_long(reference, info.seconds, request.max_audio_seconds)
            raise _refuse(source, f"{where}: {message}", "audio_too_long", ("max_audio_seconds", *FIELDS))
        speaker = voice(row[speaker_column] if speaker_column else None, source, where, speaker_column)
        for name, value in zip(rows, (reference, text.strip(), speaker, float(info.seconds))):
            rows[name].append(value)
    return datasets.Dataset.from_dict(rows)


def read_split(request: Any, eval: bool, roots: list[Path], voice: Voice = speaker_number) -> datasets.Dataset:
    """The request's training (or evaluation) rows of every source, joined (speakers as ``voice``
    reads them). Raises DatasetError."""
    parts = []
    for name, dataset, first_row, base in source_parts(request, eval):
        if request.custom_format_mapping:
            dataset = apply_mapping(dataset, request.custom_format_mapping, name)
        parts.append(tts_rows(dataset, name, base, roots, first_row, request, voice))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def preview_rows(
    dataset: datasets.Dataset,
    request: Any,
    source: str,
    base: Optional[Path],
    voice: Voice = speaker_number,
    unnamed: str = "speaker 0 for every row",
) -> KindRows:
    """The Train form's preview of ``dataset`` (the first rows of the file ``source``, relative clips
    read from ``base``) as a run of ``request`` reads them (``preview_head``, then ``tts_rows``: the
    request's ``speaker_column``, each clip found and measured): columns ``text``, ``speaker`` and
    ``audio`` (the clip references, which the preview plays), speakers as ``voice`` reads them
    (``unnamed``: the layout's words without a speaker column). Rows too long for ``max_seq_length``
    are the Check's to refuse (it counts with the model's tokenizer). Raises DatasetError naming the
    row, or the speaker column."""
    from trainer_core.data.audio_splits import preview_head
    from trainer_core.settings import get_settings

    head = preview_head(dataset, request, source)
    audio, text, speaker = _columns(head, source, request.speaker_column)
    rows = tts_rows(head, source, base, list(get_settings().allowed_roots), 1, request, voice)
    speakers = f"the speaker in {speaker}" if speaker else unnamed
    layout = f"text-to-speech rows: the words in {text}, the clip in {audio}, {speakers}"
    return KindRows(layout, rows.select_columns(["text", "speaker", "audio"]), None, request.max_seq_length)


def held_out_rows(request: Any, roots: list[Path], voice: Voice = speaker_number) -> datasets.Dataset:
    """The evaluation rows ``prepare_tts_data`` gives ``request``: its ``val_size`` split of the
    training rows, else its evaluation files / Hub split; with neither, its training rows."""
    return held_out(request, lambda eval: read_split(request, eval, roots, voice))


def row_lengths(rows: datasets.Dataset, tokenizer: Any) -> list[tuple[int, int]]:
    """Each row's (positions, trained positions): ``<bos>[speaker]text<eos>`` tokens, one a codec
    frame and the audio's end (trained: the frames and the end)."""
    texts = [f"[{speaker}]{text}" for speaker, text in zip(rows["speaker"], rows["text"])]
    counts = [len(ids) + 2 for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    return [(n + frames(s) + 1, frames(s) + 1) for n, s in zip(counts, rows["seconds"])]


def count_lengths(
    rows: datasets.Dataset, lengths: list[tuple[int, int]], max_seq_length: int, source: str, unit: str
) -> ClipSplitStats:
    """``ClipSplitStats`` of ``rows``, whose sequences make ``lengths`` (positions, trained
    positions; ``unit``: what a position is, for the message); raises DatasetError naming the first
    row (1-based, in the split) whose sequence is longer than ``max_seq_length``."""
    over = next((i for i, (n, _) in enumerate(lengths) if n > max_seq_length), None)
    if over is not None:
        raise _refuse(
            source,
            f"row {over + 1}: its text and {rows[over]['seconds']:.1f} s of audio make {lengths[over][0]} positions "
            f"({unit}), more than max_seq_length {max_seq_length}: a row is never cut (its speech would end unsaid); "
            "raise max_seq_length or use a shorter clip",
            "tts_row_too_long",
            ("max_seq_length", *FIELDS),
        )
    return ClipSplitStats.of(list(rows["seconds"]), lengths, 0, max_seq_length)


def count(rows: datasets.Dataset, tokenizer: Any, max_seq_length: int, source: str) -> ClipSplitStats:
    """``count_lengths`` of a CSM run's ``rows`` (``row_lengths``)."""
    unit = f"text tokens and {FRAMES_PER_SECOND:g} codec frames a second"
    return count_lengths(rows, row_lengths(rows, tokenizer), max_seq_length, source, unit)


def prepare_tts_data(request: Any, processor: Any) -> ClipSplits:
    """The request's (text, audio, speaker) rows: training rows, the evaluation rows (``val_size``
    split or evaluation files / Hub split), their counts. Raises DatasetError (a ``sampling_rate``
    other than the codec's; a row as ``tts_rows`` and ``count`` refuse it)."""
    from trainer_core.settings import get_settings

    rate = processor.feature_extractor.sampling_rate
    refuse_other_rate(request, rate, "codec reads and speaks audio", "tts_sampling_rate")
    roots = list(get_settings().allowed_roots)
    train, evaluation = train_and_eval(request, lambda eval: read_split(request, eval, roots))
    tokenizer, length = processor.tokenizer, request.max_seq_length
    return ClipSplits(
        train=train,
        eval=evaluation,
        format=Shape.utterances,
        stats=count(train, tokenizer, length, "training rows"),
        eval_stats=count(evaluation, tokenizer, length, "evaluation rows") if evaluation is not None else None,
        processor=processor,
    )
