"""Which text-to-speech model a config holds, from files alone (listing models imports neither torch
nor transformers): Sesame CSM by ``model_type`` (Orpheus-style models: ``kinds.orpheus.family``)."""

from __future__ import annotations

from typing import Any, Optional

FAMILIES = {"csm": "CSM"}  # model_type -> display name
TTS_MODELS = ("sesame/csm-1b", "unsloth/csm-1b")


def model_type(config: Any) -> Optional[str]:
    """``model_type`` of a ``PretrainedConfig`` or a config.json dict (None for neither)."""
    return config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)


def tts_family(config: Any) -> Optional[str]:
    """ "CSM" for a CSM config; None otherwise."""
    return FAMILIES.get(model_type(config) or "")
