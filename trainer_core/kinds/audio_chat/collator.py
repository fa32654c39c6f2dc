"""Batches of audio chat rows for training: the processor's tensors (``input_ids``,
``attention_mask``, ``input_features`` (clips, mel bins, frames) and ``feature_attention_mask``)
plus labels on the answers only, audio tokens never scored (``data.media_chat``: the turns
rendered with one audio part per ``<audio>`` marker, labelled by the text path's answer spans,
carried over the processor's expansion of each clip into its ``<|AUDIO|>`` tokens: Qwen2-Audio
makes one per 40 ms of audio). Clips are read at the feature extractor's sampling rate, refused
over ``max_audio_seconds`` (``data.audio.read_audio``)."""

from __future__ import annotations

from typing import Any, Optional

from trainer_core.data.audio import MARKER, read_audio
from trainer_core.data.media_chat import MediaChatCollator, known_token_ids


class AudioChatCollator(MediaChatCollator):
    """``collator(rows)`` -> the processor's batch plus ``labels`` (B, T), for rows with ``messages``
    and ``audios`` (``rows.AUDIO_CHAT_FEATURES``). ``max_seconds``: the longest clip allowed
    (``max_audio_seconds``; None: any); ``sampling_rate``: the rate clips are read at (None: the
    feature extractor's)."""

    marker, part, column = MARKER, "audio", "audios"

    def __init__(
        self,
        processor: Any,
        max_length: Optional[int],
        train_on_completions: bool,
        max_seconds: Optional[float] = None,
        sampling_rate: Optional[int] = None,
    ) -> None:
        super().__init__(processor, max_length, train_on_completions, audio_token_ids(processor))
        self.max_seconds = max_seconds
        self.sampling_rate = int(sampling_rate or processor.feature_extractor.sampling_rate)

    def load(self, reference: str) -> Any:
        return read_audio(reference, sampling_rate=self.sampling_rate, max_seconds=self.max_seconds)

    def media_inputs(self, media: list[list[Any]]) -> dict[str, Any]:
        clips = [clip for row in media for clip in row]  # the processor matches clips to tokens in order
        return {"audio": clips, "sampling_rate": self.sampling_rate} if clips else {}


def audio_token_ids(processor: Any) -> set[int]:
    """Token ids that stand for audio in ``processor``'s rows: its audio token and the tokens
    around it (Qwen2-Audio's ``<|AUDIO|>``, ``<|audio_bos|>``, ``<|audio_eos|>``), those the
    tokenizer knows."""
    attributes = ("audio_token", "audio_bos_token", "audio_eos_token", "begin_audio_token", "end_audio_token")
    return known_token_ids(processor, attributes, {"<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"})
