"""The prepared splits of a clip-per-row kind (speech-to-text, text-to-speech) and what they share:
the counts of a split (``ClipSplitStats``), the splits with their processor (``ClipSplits``: the
attributes the worker reads of ``data.prepared.PreparedData``), the refusal of a ``sampling_rate``
other than the model's, the training / evaluation split (``val_size`` or evaluation data), and the
rows of a file the dataset preview reads (``preview_head``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional

import datasets

from trainer_core.data.audio_preview import NOTE_ROWS
from trainer_core.data.errors import DatasetError
from trainer_core.data.formats import apply_mapping
from trainer_core.data.prepare import has_eval_data, split_validation


@dataclass
class ClipSplitStats:
    """One split's counts: ``rows``; ``total_tokens`` (the sequence positions the kind's docstring
    names); ``trained_tokens`` (the scored ones); ``truncated_rows`` (rows cut to
    ``max_seq_length``); ``seconds`` (audio, summed); ``longest_seconds``; ``longest_tokens`` (the
    longest row's positions) and ``longest_trained`` (its scored ones): what the memory estimate's
    longest batch is made of."""

    rows: int
    total_tokens: int
    trained_tokens: int
    truncated_rows: int
    max_seq_length: int
    seconds: float = 0.0
    longest_seconds: float = 0.0
    longest_tokens: int = 0
    longest_trained: int = 0

    @classmethod
    def of(
        cls, seconds: Sequence[float], lengths: Sequence[tuple[int, int]], truncated: int, max_seq_length: int
    ) -> ClipSplitStats:
        """The counts of a split whose rows last ``seconds`` and make ``lengths`` (positions, trained
        positions) each; seconds rounded to the millisecond."""
        longest = max(lengths, default=(0, 0))
        return cls(
            rows=len(lengths),
            total_tokens=sum(n for n, _ in lengths),
            trained_tokens=sum(t for _, t in lengths),
            truncated_rows=truncated,
            max_seq_length=max_seq_length,
            seconds=round(sum(seconds), 3),
            longest_seconds=round(max(seconds, default=0.0), 3),
            longest_tokens=longest[0],
            longest_trained=longest[1],
        )


@dataclass
class ClipSplits:
    """The prepared splits (columns ``audio``, ``text``, ``seconds`` and the kind's own) and their
    counts; ``format``: the kind's ``Shape``; ``processor``: the one they were counted with (the
    collator's)."""

    train: datasets.Dataset
    eval: Optional[datasets.Dataset]
    format: Enum
    stats: ClipSplitStats
    eval_stats: Optional[ClipSplitStats]
    system_message: Optional[str] = None
    processor: Any = None


def refuse_other_rate(request: Any, rate: int, reader: str, code: str) -> None:
    """Raise DatasetError (field ``sampling_rate``, ``code``) when the request's ``sampling_rate`` is
    set and not ``rate``, the rate the model reads at; ``reader`` names what reads the audio
    ("feature extractor reads audio", "codec reads and speaks audio")."""
    if request.sampling_rate and request.sampling_rate != rate:
        raise DatasetError(
            f"sampling_rate {request.sampling_rate}: this model's {reader} at {rate} Hz only (every clip is "
            "resampled to it); leave sampling_rate empty",
            fields=("sampling_rate",),
            code=code,
        )


def train_and_eval(
    request: Any, read: Callable[[bool], datasets.Dataset]
) -> tuple[datasets.Dataset, Optional[datasets.Dataset]]:
    """(training rows, evaluation rows or None): ``read(False)`` split by ``val_size``, else
    ``read(True)`` where the request has evaluation files or a Hub split. Raises DatasetError."""
    train = read(False)
    if request.val_size > 0:
        return split_validation(train, request)
    return train, read(True) if has_eval_data(request) else None


def held_out(request: Any, read: Callable[[bool], datasets.Dataset]) -> datasets.Dataset:
    """The rows an evaluation of the run scores: its ``val_size`` split of the training rows, else
    its evaluation files / Hub split; with neither, its training rows."""
    if request.val_size > 0:
        return split_validation(read(False), request)[1]
    return read(has_eval_data(request))


def preview_head(dataset: datasets.Dataset, request: Any, source: str) -> datasets.Dataset:
    """The rows of ``dataset`` (the first rows of the file ``source``) that the dataset preview reads
    for a clip-per-row kind: the first ``NOTE_ROWS`` (each clip's header is read), their columns
    mapped by the request's ``custom_format_mapping`` as training maps them. Raises DatasetError for
    a mapped column the file lacks."""
    head = dataset.select(range(min(NOTE_ROWS, len(dataset))))
    return apply_mapping(head, request.custom_format_mapping, source) if request.custom_format_mapping else head
