"""Which models are audio-in chat models (the kind's detection): found from the model's
``config.json``, never from its name.

An audio-in chat model here is one whose ``model_type`` is in ``FAMILY_NAMES`` (a family whose
processor, chat template and training were tried with a model built offline) and whose config has
an ``audio_config``. transformers 5.24 has others that hear (Voxtral, Granite Speech, Qwen2.5-Omni,
Gemma 3n), with processors of their own shapes (Voxtral's needs mistral-common's tokenizer;
Qwen2.5-Omni's config nests its audio tower in ``thinker_config``; Gemma 3n reads images too and is
the vision kind's): they stay on their current paths until tried.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.model_kind import folder_config

FAMILY_NAMES = {"qwen2_audio": "Qwen2-Audio"}
# Suggested in the refusal of audio chat data for a text-only model (real Hub ids).
AUDIO_CHAT_MODELS = ("Qwen/Qwen2-Audio-7B-Instruct",)


@dataclass(frozen=True)
class AudioChatFamily:
    """An audio-in chat model's ``model_type`` and its display name (``FAMILY_NAMES``)."""

    model_type: str
    name: str


def audio_chat_family(config: Any) -> Optional[AudioChatFamily]:
    """The family of a model config (a ``PretrainedConfig`` or the ``config.json`` dict) when it is
    an audio-in chat model, else None. Answered without importing transformers."""
    get = config.get if isinstance(config, dict) else lambda key: getattr(config, key, None)
    model_type = get("model_type")
    if model_type not in FAMILY_NAMES or not get("audio_config"):
        return None
    return AudioChatFamily(model_type, FAMILY_NAMES[model_type])


def folder_family(folder: Optional[Path]) -> Optional[AudioChatFamily]:
    """``audio_chat_family`` of the model saved in ``folder``; None for None, a folder without a
    readable config, or a model of another kind."""
    config = folder_config(folder)
    return audio_chat_family(config) if config is not None else None
