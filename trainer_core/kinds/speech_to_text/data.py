"""A speech-to-text run's data: (audio, transcript) rows read from the request's sources
(``data.prepare.source_parts``: JSON / JSONL / CSV / Parquet / a Hub split), each clip resolved
once (``data.audio.resolve_audio``: a confined path relative to the data file, a ``data:`` URL, Hub
``Audio`` bytes) and measured from its header (``audio_info``), the ``val_size`` split, and the
transcripts' token counts.

Columns: ``audio`` (or a Hub ``Audio`` column of another name) and the transcript in ``text``,
``transcript`` or ``sentence`` (the first present); other names are mapped with
``custom_format_mapping`` (e.g. ``{"text": "caption"}``). Rows come out as ``audio`` (the resolved
reference, a string) and ``text``.
"""

from __future__ import annotations

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
TEXT_COLUMNS = ("text", "transcript", "sentence")  # the transcript's usual names, first present wins
FIELDS = ("local_datasets", "custom_format_mapping")


class Shape(str, Enum):
    """The layout of a speech-to-text run's rows."""

    transcripts = "transcripts"  # (audio, text)


def _refuse(source: str, message: str, code: str, fields: tuple[str, ...] = FIELDS) -> DatasetError:
    return DatasetError(f"{source}: {message}", fields=fields, code=code)


def _columns(dataset: datasets.Dataset, source: str) -> tuple[str, str]:
    """(audio column, transcript column) of ``dataset``; raises DatasetError naming what it has."""
    audio = AUDIO_COLUMN if AUDIO_COLUMN in dataset.column_names else None
    if audio is None:
        audio = next((name for name, kind in media_columns(dataset).items() if kind == "audio"), None)
    text = next((name for name in TEXT_COLUMNS if name in dataset.column_names), None)
    if audio is None or text is None:
        raise _refuse(
            source,
            f"columns {', '.join(dataset.column_names)} make no speech-to-text rows: give an {AUDIO_COLUMN!r} column "
            f"(a path relative to the data file, a data: URL or a Hub Audio column) and the transcript in one of "
            f"{', '.join(TEXT_COLUMNS)}, or map yours with custom_format_mapping "
            '(e.g. {"audio": "path", "text": "caption"})',
            "no_speech_columns",
        )
    return audio, text


def speech_rows(
    dataset: datasets.Dataset,
    source: str,
    base: Optional[Path],
    roots: list[Path],
    first_row: int,
    max_seconds: float,
    window: Optional[float] = None,
) -> datasets.Dataset:
    """``dataset``'s rows as (``audio``: resolved reference, ``text``, ``seconds``). Raises
    DatasetError naming ``source`` and the file row (``first_row`` is ``dataset[0]``'s) for a
    missing transcript, a clip that cannot be read or found (outside ``base`` / ``roots``, not
    audio) or one longer than ``max_seconds`` or the model's ``window`` (seconds it hears at once:
    the feature extractor's ``chunk_length``; the rest would be cut off unheard)."""
    from trainer_core.data.audio import audio_info, resolve_audio, too_long

    audio_column, text_column = _columns(dataset, source)
    if isinstance(dataset.features[audio_column], datasets.Audio):
        dataset = dataset.cast_column(audio_column, datasets.Audio(decode=False))  # the bytes, not decoded
    audios, texts, seconds = [], [], []
    for index, row in enumerate(dataset.select_columns([audio_column, text_column])):
        where = f"row {first_row + index}"
        text = row[text_column]
        if not isinstance(text, str) or not text.strip():
            raise _refuse(
                source,
                f"{where}: column {text_column} holds no transcript: give every clip its text (or remove the row)",
                "transcript_missing",
            )
        try:
            reference = resolve_audio(row[audio_column], base, roots)
            info = audio_info(reference)
        except RowError as exc:
            raise _refuse(source, f"{where}: {exc}", "audio_unreadable") from None
        if info.seconds > max_seconds:
            message = too_long(reference, info.seconds, max_seconds)
            raise _refuse(source, f"{where}: {message}", "audio_too_long", ("max_audio_seconds", *FIELDS))
        if window is not None and info.seconds > window:
            raise _refuse(
                source,
                f"{where}: the clip is {info.seconds:.1f} s long, but the model hears {window:g} s at once (its "
                "feature extractor's chunk_length): the rest would be cut off unheard while its words stay in the "
                "transcript; cut it into shorter clips with their own transcripts, or remove the row",
                "audio_over_window",
            )
        audios.append(reference)
        texts.append(text.strip())
        seconds.append(float(info.seconds))
    return datasets.Dataset.from_dict({"audio": audios, "text": texts, "seconds": seconds})


def read_split(request: Any, eval: bool, roots: list[Path], window: Optional[float] = None) -> datasets.Dataset:
    """The request's training (or evaluation) rows of every source, joined (``window``: as
    ``speech_rows``). Raises DatasetError."""
    parts = []
    for name, dataset, first_row, base in source_parts(request, eval):
        if request.custom_format_mapping:
            dataset = apply_mapping(dataset, request.custom_format_mapping, name)
        parts.append(speech_rows(dataset, name, base, roots, first_row, request.max_audio_seconds, window))
    return parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)


def preview_rows(dataset: datasets.Dataset, request: Any, source: str, base: Optional[Path]) -> KindRows:
    """The Train form's preview of ``dataset`` (the first rows of the file ``source``, relative clips
    read from ``base``) as a run of ``request`` reads them (``preview_head``, then ``speech_rows``:
    each clip found and measured, none over ``max_audio_seconds``): columns ``audio`` (the clip
    references, which the preview plays) and ``text``. Transcript tokens are the Check's to count
    (its decoder prompt depends on Language and Task). Raises DatasetError naming the row."""
    from trainer_core.data.audio_splits import preview_head
    from trainer_core.settings import get_settings

    head = preview_head(dataset, request, source)
    audio, text = _columns(head, source)
    rows = speech_rows(head, source, base, list(get_settings().allowed_roots), 1, request.max_audio_seconds)
    layout = f"speech-to-text rows: the clip in {audio}, its transcript in {text}"
    notes = ["Transcript tokens: press Check (it counts them after the decoder prompt Language and Task make)."]
    return KindRows(layout, rows.select_columns(["audio", "text"]), None, request.max_seq_length, notes)


def window_seconds(processor: Any) -> Optional[float]:
    """Seconds of audio the model hears at once: its feature extractor's ``chunk_length`` (Whisper: 30)."""
    return getattr(processor.feature_extractor, "chunk_length", None)


def held_out_rows(request: Any, roots: list[Path], window: Optional[float] = None) -> datasets.Dataset:
    """The evaluation rows ``prepare_speech_data`` gives ``request``: its ``val_size`` split of the
    training rows, else its evaluation files / Hub split; with neither, its training rows."""
    return held_out(request, lambda eval: read_split(request, eval, roots, window))


def count(rows: datasets.Dataset, tokenizer: Any, prompt_tokens: int, max_seq_length: int) -> ClipSplitStats:
    """``ClipSplitStats`` of ``rows`` with transcripts tokenized by ``tokenizer`` (no special tokens):
    each row is ``prompt_tokens`` + its transcript, cut to ``max_seq_length`` decoder inputs, + eos."""
    lengths = [len(ids) for ids in tokenizer(list(rows["text"]), add_special_tokens=False)["input_ids"]]
    room = max(max_seq_length - prompt_tokens, 0)  # transcript tokens a row keeps (as ``collator.label_rows``)
    kept = [min(n, room) for n in lengths]
    return ClipSplitStats.of(
        list(rows["seconds"]),
        [(prompt_tokens + n + 1, n + 1) for n in kept],
        sum(1 for n in lengths if n > room),
        max_seq_length,
    )


def prepare_speech_data(request: Any, processor: Any, max_target_positions: int) -> ClipSplits:
    """The request's (audio, transcript) rows: training rows, the evaluation rows (``val_size``
    split or evaluation files / Hub split), their counts; decoder sequences are cut at
    ``max_seq_length`` or the model's ``max_target_positions``, where lower. Raises DatasetError."""
    from trainer_core.kinds.speech_to_text.collator import decoder_prompt
    from trainer_core.settings import get_settings

    refuse_other_rate(
        request, processor.feature_extractor.sampling_rate, "feature extractor reads audio", "speech_sampling_rate"
    )
    roots = list(get_settings().allowed_roots)
    window = window_seconds(processor)
    train, evaluation = train_and_eval(request, lambda eval: read_split(request, eval, roots, window))
    tokenizer = processor.tokenizer
    prompt = len(decoder_prompt(tokenizer, request))
    length = min(request.max_seq_length, max_target_positions)
    return ClipSplits(
        train=train,
        eval=evaluation,
        format=Shape.transcripts,
        stats=count(train, tokenizer, prompt, length),
        eval_stats=count(evaluation, tokenizer, prompt, length) if evaluation is not None else None,
        processor=processor,
    )
