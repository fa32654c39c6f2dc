"""Audio clips named by training rows: checked, decoded to mono and resampled, with a length limit.

A reference is what ``images.resolve_reference`` makes canonical (``medium="audio clip"``): a path
relative to the data file's folder (LLaMA-Factory's ``audios`` lists) or absolute, passed through the
one path check; a ``data:audio/...;base64,`` URL (OpenAI ``input_audio`` parts are turned into one);
or the bytes of a Hub ``Audio`` column read without decoding (``{"bytes": ..., "path": ...}``).

Decoding is soundfile's (libsndfile: wav, flac, ogg / opus, mp3) and resampling soxr's ("HQ"):
torchaudio has no wheel for the pinned torch, and soundfile + soxr decode and resample the shared
clips without it. A clip's length is read from its header first (``audio_info``), so a clip over
the limit is refused before it is decoded.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from trainer_core.data.errors import RowError
from trainer_core.data.images import DATA_URL, data_url_bytes, resolve_reference

MARKER = "<audio>"  # where a clip goes in a chat turn's text (LLaMA-Factory's mllm_audio_demo.json)
MEDIUM = "audio clip"  # the word refusals use
FORMATS = ("wav", "flac", "mp3", "ogg")  # the formats people bring; libsndfile reads them all


@dataclass(frozen=True)
class AudioInfo:
    """A clip's header: length in seconds, samples per second, channels."""

    seconds: float
    sampling_rate: int
    channels: int


def resolve_audio(reference: Any, base: Optional[Path], roots: Iterable[Path]) -> str:
    """The canonical form of one clip reference of a row: an absolute, confined path, a ``data:``
    URL, or (Hub ``Audio`` bytes) a ``data:`` URL of the bytes. Raises RowError (the caller adds file
    and row) for a remote URL, a path outside ``base`` and ``roots``, a missing file, or a value that
    is no clip reference."""
    return resolve_reference(reference, base, roots, medium=MEDIUM)


def input_audio_url(part: Any) -> str:
    """The ``data:`` URL of an OpenAI ``input_audio`` content part (``{"type": "input_audio",
    "input_audio": {"data": <base64>, "format": "wav" | "mp3" | ...}}``). Raises RowError when the
    part has no base64 ``data`` or names a format that is not audio."""
    inner = part.get("input_audio") if isinstance(part, dict) else None
    data = inner.get("data") if isinstance(inner, dict) else None
    fmt = str(inner.get("format") or "wav").lower() if isinstance(inner, dict) else "wav"
    if not isinstance(data, str) or not data.strip():
        raise RowError('an input_audio part needs "input_audio": {"data": <base64 of the clip>, "format": "wav"}')
    if fmt not in FORMATS:
        raise RowError(f"input_audio format {fmt[:20]!r} is not one read here: use {', '.join(FORMATS)}")
    return f"{DATA_URL}audio/{fmt};base64,{data.strip()}"


def _source(reference: str) -> Any:
    """What soundfile opens for a canonical reference: the path, or the decoded bytes of a data: URL."""
    if reference.startswith(DATA_URL):
        return io.BytesIO(data_url_bytes(reference, MEDIUM, "data:audio/wav;base64,..."))
    return reference


def _name(reference: str) -> str:
    return "(data: URL)" if reference.startswith(DATA_URL) else Path(reference).name


def audio_info(reference: str) -> AudioInfo:
    """The header of a canonical reference (nothing decoded). Raises RowError naming the clip when
    it is no audio soundfile reads (the caller adds file and row)."""
    import soundfile

    try:
        info = soundfile.info(_source(reference))
    except (soundfile.LibsndfileError, RuntimeError, OSError, ValueError, EOFError) as exc:
        if isinstance(exc, RowError):
            raise
        raise RowError(
            f"{MEDIUM} {_name(reference)} cannot be read as audio ({_reason(exc)}): give a {', '.join(FORMATS)} file"
        ) from None
    if info.samplerate <= 0 or info.frames < 0:
        raise RowError(f"{MEDIUM} {_name(reference)} has no samples (a header of {info.samplerate} Hz)")
    return AudioInfo(
        seconds=info.frames / info.samplerate, sampling_rate=int(info.samplerate), channels=int(info.channels)
    )


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}".rstrip(": ")


def too_long(reference: str, seconds: float, max_seconds: float) -> str:
    """The refusal of a clip of ``seconds`` over ``max_seconds`` (the form's *Longest clip*)."""
    return (
        f"{MEDIUM} {_name(reference)} is {seconds:.1f} s long, more than the longest clip of {max_seconds:g} s "
        "(max_audio_seconds): cut it into shorter clips, leave the row out, or raise max_audio_seconds"
    )


def read_audio(reference: str, sampling_rate: int, max_seconds: Optional[float] = None) -> np.ndarray:
    """The clip of a canonical reference as float32 mono samples at ``sampling_rate`` Hz, shape
    (samples,), values in [-1, 1]: channels averaged, resampled with soxr where the file's rate
    differs. A clip over ``max_seconds`` (None: no limit) is refused from its header before decoding.
    Raises RowError naming the clip (unreadable, damaged, empty, too long, a data: URL that is not
    base64 audio)."""
    import soundfile
    import soxr

    info = audio_info(reference)
    if max_seconds is not None and info.seconds > max_seconds:
        raise RowError(too_long(reference, info.seconds, max_seconds))
    try:
        samples, rate = soundfile.read(_source(reference), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, OSError, ValueError, EOFError) as exc:
        raise RowError(f"{MEDIUM} {_name(reference)} cannot be decoded ({_reason(exc)})") from None
    if samples.shape[0] == 0:
        raise RowError(f"{MEDIUM} {_name(reference)} holds no samples")
    mono = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    if rate != sampling_rate:
        mono = np.clip(soxr.resample(mono, rate, sampling_rate, quality="HQ"), -1.0, 1.0)  # ringing past full scale
    return np.ascontiguousarray(mono, dtype=np.float32)


def wav_bytes(samples: np.ndarray, sampling_rate: int, fmt: str = "WAV") -> bytes:
    """``samples`` (float, shape (samples,) or (samples, channels), in [-1, 1]) written as a 16-bit
    WAV (or ``fmt`` "FLAC") file's bytes: what a speech model's output is served and played as."""
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, np.asarray(samples, dtype=np.float32), sampling_rate, format=fmt, subtype="PCM_16")
    return buffer.getvalue()
