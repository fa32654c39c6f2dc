"""A request's LoRA plan on a loaded (or ``meta``) model: the targets its ``target_modules`` and
structure switches resolve to (``targets.resolve_targets``, plus a vision model's tower and
projector with ``finetune_vision_layers``: ``models.vision_targets``) and the modules its
``modules_to_save`` trains in full (``embeddings.check_modules_to_save``). The pre-flight check and
the worker both ask here, so Check and Start refuse the same requests."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from trainer_core.models.embeddings import check_modules_to_save, check_tied_pair
from trainer_core.models.targets import ALL_LINEAR, TargetError, Targets, find_blocks, resolve_targets


@dataclass(frozen=True)
class LoraPlan:
    """``targets``: what gets adapters; ``saved``: module paths trained in full (``modules_to_save``)."""

    targets: Targets
    saved: tuple[str, ...] = ()


def lora_plan(model: Any, request: Any) -> LoraPlan:
    """The plan of ``request`` (a ``TrainingStartRequest``) on ``model``. Raises ``TargetError``
    (a ValueError whose message starts with the field it is about) as ``resolve_targets`` and
    ``check_modules_to_save`` / ``check_tied_pair`` do, and when a vision model's language and
    vision switches are both off."""
    targets = _vision_targets(model, request) if _is_vision(model) else None
    if targets is None:
        targets = resolve_targets(
            model,
            list(request.target_modules),
            request.finetune_attention_modules,
            request.finetune_mlp_modules,
            request.finetune_language_layers,
        )
    saved = check_modules_to_save(model, request.modules_to_save)
    check_tied_pair(model, saved)
    return LoraPlan(targets, tuple(saved))


def _is_vision(model: Any) -> bool:
    from trainer_core.kinds.vision.family import vision_family

    return vision_family(getattr(model, "config", None) or {}) is not None


def _vision_targets(model: Any, request: Any) -> Any:
    """A vision model's targets with ``["all-linear"]``: the language blocks' (when
    ``finetune_language_layers``) plus the tower and projector (when ``finetune_vision_layers``);
    None for an explicit ``target_modules`` list (matched as for any model)."""
    from trainer_core.kinds.vision.targets import vision_paths

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
