"""The pre-flight check of a speech-to-text run (and the errors Start refuses on): its rows read as
training reads them (``data.prepare_speech_data``: every clip found and measured, none too long),
the method (sft only), one line: clips, seconds of audio, the decoder prompt and the transcripts'
tokens, and the memory and time estimates (``estimates``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.data.audio_splits import ClipSplits
from trainer_core.data.errors import DatasetError
from trainer_core.kinds.speech_to_text.data import prepare_speech_data, window_seconds
from trainer_core.kinds.speech_to_text.loading import folder_source_positions, folder_target_positions, load_processor
from trainer_core.models.loading import ModelLoadError
from trainer_core.preflight.check import refused_report
from trainer_core.preflight.clip_report import read_error, sft_only, splits_report
from trainer_core.preflight.rules import tokenizer_missing
from trainer_core.refusals import Refusal


def check_request(request: Any) -> None:
    """Raise Refusal (field ``training_method``) for a method other than sft: a speech-to-text model
    learns transcripts, not preferences or rewards."""
    sft_only(request, "speech-to-text", "(audio, transcript)", "speech_method")


def check_line(request: Any, data: ClipSplits, prompt: str, frames: int, window: float) -> str:
    """The check's line, e.g. "Speech-to-text (Whisper): 4 clips (1 held out), 17.8 s of audio,
    longest 5.9 s (limit 30 s), 6000 encoder frames (1500 a clip: each clip is heard as one 30 s
    window); decoder prompt <|startoftranscript|><|en|><|transcribe|><|notimestamps|>; transcripts
    52 tokens (13 a clip), 0 cut at 128". ``frames``: encoder frames a clip; ``window``: seconds."""
    stats = data.stats
    held = f" ({len(data.eval)} held out)" if data.eval is not None else ""
    return (
        f"Speech-to-text (Whisper): {stats.rows} clips{held}, {stats.seconds:.1f} s of audio, longest "
        f"{stats.longest_seconds:.1f} s (limit {request.max_audio_seconds:g} s), {stats.rows * frames} encoder frames "
        f"({frames} a clip: each clip is heard as one {window:g} s window); decoder prompt {prompt}; transcripts "
        f"{stats.trained_tokens} tokens ({stats.trained_tokens / max(stats.rows, 1):.0f} a clip), "
        f"{stats.truncated_rows} cut at {stats.max_seq_length}"
    )


def speech_report(request: Any, folder: Optional[Path], started: float, kind: Any) -> Any:
    """The ``PreflightReport`` of a speech-to-text run (``started``: the check's ``perf_counter``):
    rows, tokens (the decoder's and the encoder frames), steps, the kind's line (field ``vision``:
    the model kind's line) and the memory and time estimates of ``kind`` (the model's
    ``ModelKind``), or the refusal as its error (``data_error`` for data, else the Refusal's own
    code)."""
    from trainer_core.kinds.speech_to_text.collator import decoder_prompt

    if folder is None:  # a Hub model not on this machine: the worker reads the data
        return refused_report(request, [], started, False, [tokenizer_missing(request.model_name)])
    if request.hf_dataset:  # Hub data: read by the worker, as for text
        return refused_report(request, [], started)
    try:
        check_request(request)
        processor = load_processor(folder)
        data = prepare_speech_data(request, processor, folder_target_positions(folder))
    except (DatasetError, Refusal, ModelLoadError) as exc:
        return refused_report(request, [read_error(exc)], started)
    prompt = "".join(processor.tokenizer.convert_ids_to_tokens(decoder_prompt(processor.tokenizer, request)))
    frames, window = folder_source_positions(folder), float(window_seconds(processor) or 30)
    line = check_line(request, data, prompt, frames, window)
    report = splits_report(request, data, started, kind, line, folder)
    # decoder tokens + encoder frames (each clip is padded to one window)
    return report.model_copy(update={"tokens_total": report.tokens_total + data.stats.rows * frames})
