"""GGUF export of an audio-in chat model: llama.cpp runs it as the language model plus a projector
file (``mmproj``: the audio encoder and projector, run by llama-mtmd-cli / llama-server with
``--mmproj``), which its converter writes for the architectures in its ``MMPROJ_MODEL_MAP``
(``Qwen2AudioForConditionalGeneration``: as ``ultravox``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from trainer_core.export.gguf_convert import supported_architectures
from trainer_core.kinds.audio_chat.family import audio_chat_family


def projector_problem(config: dict, folder: Path) -> Optional[str]:
    """Why llama.cpp's converter in ``folder`` cannot write the ``mmproj`` file (audio encoder and
    projector) of an audio-in chat model with this config.json, or None (also None for a model of
    another kind, or when the registry cannot be read)."""
    family = audio_chat_family(config)
    known = supported_architectures(folder, "MMPROJ_MODEL_MAP")
    architectures = config.get("architectures") or []
    if family is None or not known or not architectures or architectures[0] in known:
        return None
    return (
        f"GGUF export of {family.name} needs llama.cpp's projector file (mmproj) for its audio, and llama.cpp's "
        f"converter cannot write one for {architectures[0]}; export the merged model or the adapter instead"
    )
