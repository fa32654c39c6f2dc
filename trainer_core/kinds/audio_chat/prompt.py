"""A conversation with audio clips made into an audio-in chat model's inputs (the kind's
``chat_inputs``), as training made its rows (``serving.media_prompt``: the processor's chat
template over content parts, one audio part per ``<audio>`` marker; clips read at the feature
extractor's sampling rate, at most ``MAX_SECONDS`` long)."""

from __future__ import annotations

from typing import Any

from trainer_core.data.audio import MARKER, read_audio
from trainer_core.data.errors import RowError
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.media_prompt import placed, prompt_text, refuse_other_media

MAX_SECONDS = 30.0  # longest clip in chat: Whisper-style encoders hear 30 s windows


def audio_chat_inputs(processor: Any, messages: list[dict[str, Any]], device: str) -> dict[str, Any]:
    """The processor's tensors (``input_ids`` (1, T), ``attention_mask``, ``input_features`` (clips,
    mel bins, frames), ``feature_attention_mask``) for ``messages`` (each turn's ``audios``: data:
    URLs) plus the generation prompt, on ``device``. Raises ChatInputError for an unreadable or too
    long clip, an image, or a template that cannot render."""
    refuse_other_media(messages, "images", "audio chat")
    turns, audios = placed(messages, "audios", MARKER, "audio clip")
    rate = int(processor.feature_extractor.sampling_rate)
    try:
        clips = [read_audio(audio, sampling_rate=rate, max_seconds=MAX_SECONDS) for audio in audios]
    except RowError as exc:
        raise ChatInputError(f"messages: {exc}", fields=("messages",)) from None
    text = prompt_text(processor, turns, MARKER, "audio")
    extra = {"audio": clips, "sampling_rate": rate} if clips else {}
    inputs = processor(text=[text], **extra, add_special_tokens=False, return_tensors="pt")
    return {key: value.to(device) for key, value in inputs.items()}
