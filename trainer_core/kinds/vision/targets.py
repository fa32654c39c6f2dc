"""LoRA targets of a vision-language model outside its language blocks: the vision tower's block
projections and the projector (Qwen2-VL's ``merger``, LLaVA's ``multi_modal_projector``, Idefics3's
``connector``), found in the loaded model by where they sit, not by one family's names.

``finetune_vision_layers`` adds them to the language targets (``models.targets``); with
``finetune_language_layers`` off they are the only ones.
"""

from __future__ import annotations

from typing import Any

from trainer_core.models.targets import _linear, find_blocks, strip_peft_prefix

TOWER_WORDS = ("vision", "visual", "image")
PROJECTOR_WORDS = ("merger", "projector", "connector", "multi_modal", "mm_proj", "aligner")


def vision_paths(model: Any) -> tuple[str, ...]:
    """Full paths of the linear layers of ``model``'s vision tower and projector (every linear
    layer whose path names a vision tower or a projector and lies outside the language blocks),
    as the base model names them. Empty for a text-only model."""
    language, _ = find_blocks(model)
    found = []
    for path, module in model.named_modules():
        path = strip_peft_prefix(path)
        if not _linear(module) or path.startswith(language + ".") or ".base_layer" in path or ".lora_" in path:
            continue
        parts = path.lower().split(".")
        if any(word in part for part in parts for word in TOWER_WORDS + PROJECTOR_WORDS):
            found.append(path)
    return tuple(found)
