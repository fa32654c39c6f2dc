"""The check's view of the model's structure, from its config alone (no weights): the attention
implementation training will use and the projections LoRA will adapt (``models.targets``), or the
error an explicit ``target_modules`` that misses gets at Check and at Start."""

from __future__ import annotations

import logging
from typing import Optional

from pydantic import BaseModel

from trainer_core.data.preview_tokenizer import local_model_folder
from trainer_core.preflight.report import Issue
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import TrainingType

log = logging.getLogger(__name__)
TARGET_FIELDS = (
    "target_modules",
    "finetune_vision_layers",
    "finetune_attention_modules",
    "finetune_mlp_modules",
    "finetune_language_layers",
    "modules_to_save",
)


class ModelStructure(BaseModel):
    """``architecture`` (the config's class name), ``attention`` (``attention_choice.attention_note``),
    ``adapted`` (``Targets.summary()``, None for full fine-tuning) and ``adapted_count`` (LoRA
    layers in the whole model; 0 for full fine-tuning)."""

    architecture: str
    attention: str
    adapted: Optional[str] = None
    adapted_count: int = 0


def model_structure(request: TrainingStartRequest, settings: Settings) -> tuple[Optional[ModelStructure], list[Issue]]:
    """(structure, errors) of ``request``'s model when its folder is on this machine and
    transformers maps its config to a causal LM; (None, []) otherwise (the worker checks after
    loading). The model is built on the ``meta`` device from ``config.json``: no memory, no weights.
    An explicit ``target_modules`` that matches nothing, or both attention / MLP switches off, is an
    error naming the field (``models.targets.TargetError``), as is ``use_loftq`` off a CUDA machine."""
    from trainer_core.preflight.costs import training_device
    from trainer_core.training.loftq import loftq_refusal

    refusal = loftq_refusal(training_device()) if request.use_loftq else None
    if refusal:
        return None, [Issue(level="error", code="loftq_device", message=refusal, fields=["use_loftq"])]
    folder = local_model_folder(request.model_name, settings)
    if folder is None:
        return None, []
    import torch
    from transformers import AutoConfig

    from trainer_core.model_kind import kind_of
    from trainer_core.models.attention_choice import attention_note, load_attention
    from trainer_core.models.lora_plan import lora_plan
    from trainer_core.models.remote_code import RemoteCodeError, load_kwargs
    from trainer_core.models.targets import TargetError

    try:
        own_code = load_kwargs(folder, request.trust_remote_code, settings.allow_remote_code)
    except RemoteCodeError as exc:
        return None, [Issue(level="error", code="remote_code", message=str(exc), fields=["trust_remote_code"])]
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True, **own_code)
        auto_class = kind_of(config).model_class()  # the model kind's auto class
        with torch.device("meta"):
            model = auto_class.from_config(config, **own_code)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as exc:
        log.info("no structure for %s: %s", request.model_name, exc)
        return None, []
    structure = ModelStructure(
        architecture=type(model).__name__, attention=attention_note(load_attention(config, training_device()))
    )
    if request.training_type == TrainingType.full:
        return structure, []
    try:
        targets = lora_plan(model, request).targets
    except TargetError as exc:
        named = str(exc).split(":", 1)[0].split(" / ")  # the message starts with the field(s) it is about
        fields = [name for name in named if name in TARGET_FIELDS] or list(TARGET_FIELDS)
        return structure, [Issue(level="error", code="lora_targets", message=str(exc), fields=fields)]
    structure.adapted, structure.adapted_count = targets.summary(), targets.count
    return structure, []
