"""GGUF export of a vision-language model: llama.cpp runs it as the language model plus a projector
file (``mmproj``: the vision tower and projector), which its converter writes for the architectures
in its ``MMPROJ_MODEL_MAP`` (``export.gguf_convert.supported_architectures``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from trainer_core.export.gguf_convert import supported_architectures
from trainer_core.kinds.vision.family import vision_family


def mmproj_problem(config: dict, folder: Path) -> Optional[str]:
    """Why llama.cpp's converter in ``folder`` cannot write the ``mmproj`` file (vision tower and
    projector) of a vision-language model with this config.json, or None (also None for a
    text-only model, or when the registry cannot be read)."""
    family = vision_family(config)
    known = supported_architectures(folder, "MMPROJ_MODEL_MAP")
    architectures = config.get("architectures") or []
    if family is None or not known or not architectures or architectures[0] in known:
        return None
    return (
        f"GGUF export of {family.name} needs llama.cpp's projector file (mmproj) for its images, and llama.cpp's "
        f"converter cannot write one for {architectures[0]}; export the merged model or the adapter instead"
    )
