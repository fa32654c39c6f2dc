"""LoRA targets of a vision-language model outside its language blocks: the vision tower's block
projections and the projector (Qwen2-VL's ``merger``, LLaVA's ``multi_modal_projector``, Idefics3's
``connector``), found in the loaded model by where they sit, not by one family's names.

``finetune_vision_layers`` adds them to the language targets (``models.targets``); with
``finetune_language_layers`` off they are the only ones (``vision_targets``, asked by
``models.lora_plan`` through the kind). The check counts the tower's parameters
(``tower_parameters``) on the model built on the ``meta`` device.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainer_core.models.block_walk import linear
from trainer_core.models.targets import (
    ALL_LINEAR,
    TargetError,
    Targets,
    find_blocks,
    resolve_targets,
    strip_peft_prefix,
)
from trainer_core.models.towers import outside_language_parameters

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
        if not linear(module) or path.startswith(language + ".") or ".base_layer" in path or ".lora_" in path:
            continue
        parts = path.lower().split(".")
        if any(word in part for part in parts for word in TOWER_WORDS + PROJECTOR_WORDS):
            found.append(path)
    return tuple(found)


def vision_targets(model: Any, request: Any) -> Any:
    """A vision model's targets with ``["all-linear"]``: the language blocks' (when
    ``finetune_language_layers``) plus the tower and projector (when ``finetune_vision_layers``);
    None for an explicit ``target_modules`` list (matched as for any model). Raises TargetError when
    both switches are off."""
    if list(request.target_modules) != [ALL_LINEAR]:
        return None
    vision = vision_paths(model) if request.finetune_vision_layers else ()
    if request.finetune_language_layers:
        language = resolve_targets(
            model, [ALL_LINEAR], request.finetune_attention_modules, request.finetune_mlp_modules, True
        )
        return replace(language, vision=vision)
    if not vision:
        raise TargetError(
            "finetune_language_layers / finetune_vision_layers: both are off, so nothing would be trained; turn one on"
        )
    blocks, layers = find_blocks(model)
    return Targets(blocks, len(layers), (), (), vision=vision)


def tower_parameters(config: Any) -> int:
    """Parameters of a vision-language model's vision tower and projector (every parameter outside
    the language model, counted on the model built on the ``meta`` device:
    ``towers.outside_language_parameters``); 0 for the config.json dict or a config transformers
    cannot build."""
    return outside_language_parameters(config, "AutoModelForImageTextToText")
