"""The pre-flight check of a text-to-speech run (and the errors Start refuses on): its rows read as
training reads them (``data.prepare_tts_data``: every clip found and measured, none too long, every
row within ``max_seq_length``), the method (sft only), and one line: clips, seconds of audio,
speakers, codec frames and the sequences' positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.data.audio_splits import ClipSplits
from trainer_core.data.errors import DatasetError
from trainer_core.kinds.text_to_speech.data import FRAMES_PER_SECOND, prepare_tts_data
from trainer_core.kinds.text_to_speech.serve import load_processor
from trainer_core.models.loading import ModelLoadError
from trainer_core.preflight.check import refused_report
from trainer_core.preflight.clip_report import read_error, sft_only, splits_report
from trainer_core.preflight.rules import tokenizer_missing
from trainer_core.refusals import Refusal


def check_request(request: Any) -> None:
    """Raise Refusal (field ``training_method``) for a method other than sft: a text-to-speech
    model learns the clips' speech, not preferences or rewards."""
    sft_only(request, "text-to-speech", "(text, audio)", "tts_method")


def check_line(request: Any, data: ClipSplits) -> str:
    """The check's line, e.g. "Text-to-speech (CSM): 4 clips (1 held out), 17.8 s of audio, longest
    5.9 s (limit 30 s), 2 speakers, 224 codec frames (12.5 a second); 300 positions (228 trained),
    the longest row 80 of max_seq_length 512"."""
    stats = data.stats
    held = f" ({len(data.eval)} held out)" if data.eval is not None else ""
    speakers = len(set(data.train["speaker"]))
    return (
        f"Text-to-speech (CSM): {stats.rows} clips{held}, {stats.seconds:.1f} s of audio, longest "
        f"{stats.longest_seconds:.1f} s (limit {request.max_audio_seconds:g} s), {speakers} "
        f"speaker{'s' if speakers != 1 else ''}, {stats.trained_tokens - stats.rows} codec frames "
        f"({FRAMES_PER_SECOND:g} a second); {stats.total_tokens} positions ({stats.trained_tokens} trained), "
        f"max_seq_length {stats.max_seq_length}"
    )


def tts_report(request: Any, folder: Optional[Path], started: float, kind: Any) -> Any:
    """The ``PreflightReport`` of a text-to-speech run (``started``: the check's ``perf_counter``):
    rows, positions, steps, the kind's line (field ``vision``: the model kind's line) and the memory
    and time estimates of ``kind`` (the model's ``ModelKind``), or the refusal as its error."""
    if folder is None:  # a Hub model not on this machine: the worker reads the data
        return refused_report(request, [], started, False, [tokenizer_missing(request.model_name)])
    if request.hf_dataset:  # Hub data: read by the worker, as for text
        return refused_report(request, [], started)
    try:
        check_request(request)
        data = prepare_tts_data(request, load_processor(folder))
    except (DatasetError, Refusal, ModelLoadError) as exc:
        return refused_report(request, [read_error(exc)], started)
    return splits_report(request, data, started, kind, check_line(request, data), folder)
