"""A request's LoRA plan on a loaded (or ``meta``) model: the targets its ``target_modules`` and
structure switches resolve to (``targets.resolve_targets``, or the model kind's own targets:
``ModelKind.lora_targets``, e.g. a vision model's tower and projector) and the modules its
``modules_to_save`` trains in full (``embeddings.check_modules_to_save``). The pre-flight check and
the worker both ask here, so Check and Start refuse the same requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer_core.model_kind import kind_of
from trainer_core.models.embeddings import check_modules_to_save, check_tied_pair
from trainer_core.models.targets import Targets, resolve_targets


@dataclass(frozen=True)
class LoraPlan:
    """``targets``: what gets adapters; ``saved``: module paths trained in full (``modules_to_save``)."""

    targets: Targets
    saved: tuple[str, ...] = ()


def lora_plan(model: Any, request: Any) -> LoraPlan:
    """The plan of ``request`` (a ``TrainingStartRequest``) on ``model``. Raises ``TargetError``
    (a ValueError whose message starts with the field it is about) as ``resolve_targets``, the
    kind's ``lora_targets`` and ``check_modules_to_save`` / ``check_tied_pair`` do."""
    targets = kind_of(getattr(model, "config", None) or {}).lora_targets(model, request)
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
