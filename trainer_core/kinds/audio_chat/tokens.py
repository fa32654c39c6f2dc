"""What the clips of audio chat rows add to the check's token counts (``AUDIO_CHAT.media_tokens``):
each clip becomes ``round(seconds x rate)`` audio tokens in the language model's input, at most a
window's worth, where ``rate`` is the processor's audio tokens per second of audio (after the audio
tower's downsampling) and the window the feature extractor's ``chunk_length``.

Both are asked of the model's own processor, not written down: it expands one audio placeholder
for a silent clip of one window (Qwen2-Audio: 30 s of 16 kHz audio, 100 log-mel frames a second,
halved by the encoder's stride-2 convolution and again by its pooling: 750 tokens, 25 a second).
A clip's length comes from its file's header (``data.audio.audio_info``); rows are read as the check
reads them (canonical ``messages`` + ``audios``)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.errors import RowError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AudioRate:
    """The processor's ``tokens_per_second`` of audio and the most one clip makes (``window_tokens``,
    of ``window_seconds``)."""

    tokens_per_second: float
    window_tokens: int
    window_seconds: float

    def clip_tokens(self, seconds: float) -> int:
        """Audio tokens of a clip ``seconds`` long (its part beyond the window is not heard)."""
        return min(round(seconds * self.tokens_per_second), self.window_tokens)


def processor_rate(processor: Any) -> AudioRate:
    """``AudioRate`` of ``processor`` (a feature extractor + tokenizer processor with an audio token,
    e.g. ``Qwen2AudioProcessor``), measured by expanding one placeholder for a silent clip of the
    feature extractor's ``chunk_length`` (30 s when it has none)."""
    import numpy as np

    extractor = processor.feature_extractor
    rate = int(extractor.sampling_rate)
    window = float(getattr(extractor, "chunk_length", None) or 30)
    token = getattr(processor, "audio_token", None) or "<|AUDIO|>"
    silence = np.zeros(int(window * rate), dtype=np.float32)
    encoded = processor(text=[token], audio=[silence], sampling_rate=rate, return_tensors="np")
    tokens = int((encoded["input_ids"][0] == processor.tokenizer.convert_tokens_to_ids(token)).sum())
    return AudioRate(tokens / window, tokens, window)


@functools.lru_cache(maxsize=8)
def folder_rate(folder: str) -> Optional[AudioRate]:
    """``processor_rate`` of the processor saved in ``folder`` (measured once per folder in this
    process); None when it cannot be loaded or expands no audio token (logged)."""
    from trainer_core.kinds.audio_chat.processor import load_processor
    from trainer_core.models.loading import ModelLoadError, remote_code

    try:
        found = processor_rate(load_processor(Path(folder), **remote_code(Path(folder))))
    except (ModelLoadError, ValueError, TypeError, KeyError) as exc:
        log.info("no audio token rate for %s: %s", folder, exc)
        return None
    return found if found.window_tokens > 0 else None


def row_audio_tokens(audios: list[list[str]], rate: AudioRate) -> list[int]:
    """Audio tokens of each row's clips (canonical references), by ``rate``; a clip whose header
    cannot be read counts 0 (the data check refuses it by file and row)."""
    from trainer_core.data.audio import audio_info

    def seconds(reference: str) -> float:
        try:
            return audio_info(reference).seconds
        except RowError:
            return 0.0

    return [sum(rate.clip_tokens(seconds(ref)) for ref in refs or []) for refs in audios]


def media_tokens(folder: Optional[Path], rows: Any) -> Optional[list[int]]:
    """Audio tokens of each of ``rows`` (a ``datasets.Dataset`` with an ``audios`` column) for the
    model saved in ``folder``; None without clips, without the model here or without a rate."""
    if folder is None or "audios" not in rows.column_names:
        return None
    rate = folder_rate(str(folder))
    return row_audio_tokens(rows["audios"], rate) if rate is not None else None
