"""Which models read images (the kind's detection): found from the model's ``config.json``, never
from its name.

A vision-language model is one whose ``model_type`` transformers maps to an image-text-to-text
class (``MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES``: Qwen2-VL, Qwen2.5-VL, Gemma 3, Idefics3,
SmolVLM, LLaVA, Llama 3.2 Vision, ...) and whose config has a ``vision_config``. Gemma 3's 1B model
is text-only (``gemma3_text``) and stays on the text path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.model_kind import folder_config

# Display names of the families people fine-tune most; others show their model_type.
FAMILY_NAMES = {
    "qwen2_vl": "Qwen2-VL",
    "qwen2_5_vl": "Qwen2.5-VL",
    "qwen3_vl": "Qwen3-VL",
    "gemma3": "Gemma 3",
    "gemma3n": "Gemma 3n",
    "idefics3": "Idefics3",
    "smolvlm": "SmolVLM",
    "llava": "LLaVA",
    "llava_next": "LLaVA-NeXT",
    "llava_onevision": "LLaVA-OneVision",
    "mllama": "Llama 3.2 Vision",
    "mistral3": "Mistral Small 3.1",
    "paligemma": "PaliGemma",
    "pixtral": "Pixtral",
}
# Suggested in the refusal of image data for a text-only model (real Hub ids, small first).
VISION_MODELS = (
    "HuggingFaceTB/SmolVLM-256M-Instruct",
    "Qwen/Qwen2-VL-2B-Instruct",
    "Qwen/Qwen2.5-VL-3B-Instruct",
    "google/gemma-3-4b-it",
    "llava-hf/llava-1.5-7b-hf",
)


@dataclass(frozen=True)
class VisionFamily:
    """A vision-language model's ``model_type`` and its display name (``FAMILY_NAMES``)."""

    model_type: str
    name: str


def vision_family(config: Any) -> Optional[VisionFamily]:
    """The family of a model config (a ``PretrainedConfig`` or the ``config.json`` dict) when it is
    a vision-language model, else None."""
    get = config.get if isinstance(config, dict) else lambda key: getattr(config, key, None)
    model_type = get("model_type")
    if not get("vision_config"):  # text-only: answered without importing transformers
        return None
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    if model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return None
    return VisionFamily(model_type, FAMILY_NAMES.get(model_type, model_type))


def folder_family(folder: Optional[Path]) -> Optional[VisionFamily]:
    """``vision_family`` of the model saved in ``folder`` (its ``config.json``); None for None, a
    folder without a readable config, or a text-only model."""
    config = folder_config(folder)
    return vision_family(config) if config is not None else None
