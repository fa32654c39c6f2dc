"""The pre-flight check of an Orpheus-style run (and the errors Start refuses on): the codec
(``audio_codec``: found and of Orpheus' layout; its weights are read by the worker; a folder path
is confined by the door's admission, ``admission.request_paths``, before the check), the
tokenizer's Orpheus tokens, the method (sft only), the rows read as training reads them (every
clip found and measured, none too long) and each row's positions counted from its clip's length
(``data.estimated_lengths``: nothing encoded here), and one line: clips, seconds of audio,
speakers, codec frames and positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.data.audio_splits import ClipSplits, refuse_other_rate, train_and_eval
from trainer_core.data.errors import DatasetError
from trainer_core.kinds.orpheus import codec as snac
from trainer_core.kinds.orpheus.data import estimated_lengths, rows_of, unit
from trainer_core.kinds.orpheus.tokens import FRAME, OrpheusTokens
from trainer_core.kinds.text_to_speech.check import check_request
from trainer_core.kinds.text_to_speech.data import Shape, count_lengths
from trainer_core.models.loading import ModelLoadError, load_tokenizer
from trainer_core.preflight.check import refused_report
from trainer_core.preflight.clip_report import read_error, splits_report
from trainer_core.preflight.rules import tokenizer_missing
from trainer_core.refusals import Refusal


def check_line(request: Any, data: ClipSplits, config: dict[str, Any]) -> str:
    """The check's line, e.g. "Text-to-speech (Orpheus, SNAC hubertsiuzdak/snac_24khz): 2 clips, 5.1 s
    of audio, longest 2.9 s (limit 30 s), 2 speakers, 60 codec frames (7 codes a frame, 11.7 frames
    a second); 500 positions (424 trained), max_seq_length 1024"."""
    stats = data.stats
    held = f" ({len(data.eval)} held out)" if data.eval is not None else ""
    speakers = len(set(data.train["speaker"]))
    frames = (stats.trained_tokens - 2 * stats.rows) // FRAME
    return (
        f"Text-to-speech (Orpheus, SNAC {request.audio_codec}): {stats.rows} clips{held}, {stats.seconds:.1f} s of "
        f"audio, longest {stats.longest_seconds:.1f} s (limit {request.max_audio_seconds:g} s), {speakers} "
        f"speaker{'s' if speakers != 1 else ''}, {frames} codec frames ({unit(config).split(' and ')[1]}); "
        f"{stats.total_tokens} positions ({stats.trained_tokens} trained), max_seq_length {stats.max_seq_length}"
    )


def checked_data(request: Any, folder: Path) -> tuple[ClipSplits, dict[str, Any]]:
    """(the request's splits counted as ``data.estimated_lengths`` counts them, the codec's config).
    Raises CodecMissing, PathNotAllowed, Refusal, DatasetError, ModelLoadError."""
    check_request(request)
    config = snac.codec_config(snac.codec_folder(request.audio_codec))  # a path: confined by the admission
    tokenizer = load_tokenizer(folder)
    ids = OrpheusTokens.of(tokenizer)
    refuse_other_rate(request, snac.sampling_rate(config), "codec reads and speaks audio", "tts_sampling_rate")
    from trainer_core.settings import get_settings

    roots = list(get_settings().allowed_roots)
    train, evaluation = train_and_eval(request, lambda eval: rows_of(request, eval, roots))

    def stats(rows: Any, source: str) -> Any:
        lengths = estimated_lengths(rows, tokenizer, ids, config)
        return count_lengths(rows, lengths, request.max_seq_length, source, unit(config))

    held = stats(evaluation, "evaluation rows") if evaluation is not None else None
    splits = ClipSplits(train, evaluation, Shape.utterances, stats(train, "training rows"), held, processor=tokenizer)
    return splits, config


def orpheus_report(request: Any, folder: Optional[Path], started: float, kind: Any) -> Any:
    """The ``PreflightReport`` of an Orpheus-style run (``started``: the check's ``perf_counter``):
    rows, positions, steps and the kind's line (field ``vision``), ``kind``'s estimates (a ``ModelKind``),
    or the refusal as its error."""
    if folder is None:  # a Hub model not on this machine: the worker reads the data
        return refused_report(request, [], started, False, [tokenizer_missing(request.model_name)])
    try:
        if request.hf_dataset:  # Hub data: read by the worker, as for text; the codec is checked here
            snac.codec_config(snac.codec_folder(request.audio_codec))
            return refused_report(request, [], started)
        data, config = checked_data(request, folder)
    except (DatasetError, Refusal, ModelLoadError) as exc:
        return refused_report(request, [read_error(exc)], started)
    return splits_report(request, data, started, kind, check_line(request, data, config), folder)
