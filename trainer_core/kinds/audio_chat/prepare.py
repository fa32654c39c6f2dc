"""Audio chat rows made ready for training (``data.media_prepare``: each row rendered, its clips
read and processed once to count the tokens they make, rows a run cannot use left out and
counted), with what the clips cost (``AudioStats``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer_core.data.errors import DatasetError
from trainer_core.data.media_prepare import prepare_media_data
from trainer_core.kinds.audio_chat.collator import AudioChatCollator

TOO_LONG_FIX = "raise max_seq_length or lower max_audio_seconds"


@dataclass
class AudioStats:
    """What the clips of a split cost: ``clips`` in all, ``tokens`` they expand to, each clip's
    length in seconds (at ``sampling_rate`` Hz) and each kept row's length in tokens with its clips."""

    sampling_rate: int
    clips: int = 0
    tokens: int = 0
    seconds: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)  # tokens of each kept row, clips included

    def add(self, media: list[Any], tokens: int, length: int) -> None:
        """Count one kept row: its clips (1-D samples), the ``tokens`` they expand to, its ``length``."""
        self.clips += len(media)
        self.tokens += tokens
        self.seconds.extend(len(clip) / self.sampling_rate for clip in media)
        self.lengths.append(length)

    @property
    def tokens_per_second(self) -> float:
        total = sum(self.seconds)
        return self.tokens / total if total else 0.0

    def line(self) -> str:
        """e.g. "3 clips, 12.8 s in all (2.9 to 5.9 s), 25 tokens per second of audio"."""
        if not self.clips:
            return "no audio clips"
        span = f"{min(self.seconds):.1f} to {max(self.seconds):.1f} s"
        return (
            f"{self.clips} clip{'s' if self.clips != 1 else ''}, {sum(self.seconds):.1f} s in all ({span}), "
            f"{self.tokens_per_second:.0f} tokens per second of audio"
        )


def audio_collator(processor: Any, request: Any) -> AudioChatCollator:
    """The collator of ``request`` (``max_seq_length``, ``train_on_completions``,
    ``max_audio_seconds``, ``sampling_rate``) for ``processor``. Raises DatasetError naming
    ``sampling_rate`` when it is set and differs from the rate the model's feature extractor was
    made for (its features would not be the ones the model learned)."""
    expected = int(processor.feature_extractor.sampling_rate)
    if request.sampling_rate and int(request.sampling_rate) != expected:
        raise DatasetError(
            f"sampling_rate: {request.sampling_rate} Hz, but this model's feature extractor reads audio at "
            f"{expected} Hz (clips are resampled to it): leave sampling_rate empty or set it to {expected}",
            fields=("sampling_rate",),
        )
    return AudioChatCollator(
        processor,
        request.max_seq_length,
        request.train_on_completions,
        request.max_audio_seconds,
        request.sampling_rate,
    )


def prepare_audio_chat_data(request: Any, processor: Any, kind: Any) -> Any:
    """``data.prepared.prepare_data`` for an audio-in chat model (``media_prepare.prepare_media_data``
    with the audio collator): a ``PreparedData`` whose splits are canonical rows (``messages``,
    ``audios``) and whose ``audio`` is the training split's ``AudioStats``. ``kind``: the audio chat
    kind, whose rows are read. Raises DatasetError (a clip over ``max_audio_seconds`` by row)."""
    collator = audio_collator(processor, request)
    return prepare_media_data(
        request, collator, kind, lambda: AudioStats(collator.sampling_rate), "audio", TOO_LONG_FIX
    )
