"""An Orpheus-style run's data: the text-to-speech kind's (text, audio[, speaker]) rows and their
refusals (``kinds.text_to_speech.data``: the same columns, clips, splits and ``max_seq_length``
rule), each speaker a name (Orpheus says ``"name: text"``; none without a speaker column), and each
clip encoded once by the SNAC codec into the tokens the model learns to say (``tokens``:
``input_ids`` and ``prompt_length``, the positions before the speech, never scored).

The check counts without encoding: a clip of ``s`` seconds makes ``codec.frames`` frames of 7
tokens (SNAC 24 kHz: 2048 samples a frame, 11.7 frames a second)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.audio_splits import ClipSplits, ClipSplitStats, held_out, refuse_other_rate, train_and_eval
from trainer_core.data.errors import DatasetError, RowError
from trainer_core.kinds.orpheus import codec as snac
from trainer_core.kinds.orpheus.tokens import FRAME, OrpheusTokens, prompt_ids, prompt_lengths, speech_ids
from trainer_core.kinds.text_to_speech.data import Shape, count_lengths, read_split


def speaker_name(value: Any, source: str, where: str, column: Optional[str]) -> str:
    """A row's Orpheus speaker: the column's text, stripped ("" without a column or value)."""
    return str(value).strip() if column is not None and value is not None else ""


def rows_of(request: Any, eval: bool, roots: list[Path]) -> datasets.Dataset:
    """The request's training (or evaluation) rows, speakers by name. Raises DatasetError."""
    return read_split(request, eval, roots, speaker_name)


def held_out_rows(request: Any, roots: list[Path]) -> datasets.Dataset:
    """The clips an evaluation of ``request``'s run scores (``data_splits.held_out``)."""
    return held_out(request, lambda eval: rows_of(request, eval, roots))


def unit(config: dict[str, Any]) -> str:
    """What a position is, for the messages: "text tokens and 7 codes a frame, 11.7 frames a second"."""
    rate = snac.sampling_rate(config) / snac.samples_per_frame(config)
    return f"text tokens and {FRAME} codes a frame, {rate:.1f} frames a second"


def estimated_lengths(
    rows: datasets.Dataset, tokenizer: Any, ids: OrpheusTokens, config: dict[str, Any]
) -> list[tuple[int, int]]:
    """Each row's (positions, trained positions) from its clip's length (the check: nothing encoded)."""
    prompts = prompt_lengths(ids, tokenizer, list(rows["text"]), list(rows["speaker"]))
    rate = snac.sampling_rate(config)
    speech = [FRAME * snac.frames(round(s * rate), config) + 2 for s in rows["seconds"]]
    return [(p + n, n) for p, n in zip(prompts, speech)]


def encoded(
    rows: datasets.Dataset, tokenizer: Any, ids: OrpheusTokens, codec: Any, config: dict[str, Any], max_seconds: float
) -> datasets.Dataset:
    """``rows`` with ``input_ids`` (the prompt, then the speech: ``tokens``) and ``prompt_length``:
    each clip read at the codec's rate and encoded. Raises DatasetError naming a clip that cannot
    be read."""
    from trainer_core.data.audio import read_audio

    rate, sequences, prompts = snac.sampling_rate(config), [], []
    for row in rows:
        try:
            samples = read_audio(row["audio"], sampling_rate=rate, max_seconds=max_seconds)
        except RowError as exc:
            raise DatasetError(str(exc), fields=("local_datasets",), code="audio_unreadable") from None
        prompt = prompt_ids(ids, tokenizer, row["text"], row["speaker"])
        sequences.append(prompt + speech_ids(ids, snac.encode(codec, samples)))
        prompts.append(len(prompt))
    return rows.add_column("input_ids", sequences).add_column("prompt_length", prompts)


def split_stats(rows: datasets.Dataset, max_seq_length: int, source: str, config: dict[str, Any]) -> ClipSplitStats:
    """The counts of encoded ``rows``; DatasetError for one longer than ``max_seq_length``."""
    lengths = [(len(s), len(s) - p) for s, p in zip(rows["input_ids"], rows["prompt_length"])]
    return count_lengths(rows, lengths, max_seq_length, source, unit(config))


def prepare_orpheus_data(request: Any, tokenizer: Any) -> ClipSplits:
    """The request's rows encoded by its codec (``request.audio_codec``, on the worker's device):
    training rows, the evaluation rows (``val_size`` split or evaluation files / Hub split), their
    counts. Raises DatasetError (a ``sampling_rate`` other than the codec's; a row as the
    text-to-speech rows refuse it), CodecMissing, PathNotAllowed, Refusal (not Orpheus' tokens)."""
    from trainer_core.settings import get_settings

    ids = OrpheusTokens.of(tokenizer)
    codec, config = snac.request_codec(request)
    refuse_other_rate(request, snac.sampling_rate(config), "codec reads and speaks audio", "tts_sampling_rate")
    roots = list(get_settings().allowed_roots)
    train, evaluation = train_and_eval(request, lambda eval: rows_of(request, eval, roots))
    train = encoded(train, tokenizer, ids, codec, config, request.max_audio_seconds)
    if evaluation is not None:
        evaluation = encoded(evaluation, tokenizer, ids, codec, config, request.max_audio_seconds)
    length = request.max_seq_length
    return ClipSplits(
        train=train,
        eval=evaluation,
        format=Shape.utterances,
        stats=split_stats(train, length, "training rows", config),
        eval_stats=split_stats(evaluation, length, "evaluation rows", config) if evaluation is not None else None,
        processor=tokenizer,
    )
