"""What every trainer builder (SFT ``trainer``, DPO / ORPO / KTO ``preference``, ``grpo``) sets up
the same way around TRL's trainer: the callbacks that can end a run early, the LoRA config (none
when the model already carries an adapter), and the studio's settings on the built trainer.
"""

from __future__ import annotations

from typing import Any, Optional

from transformers import EarlyStoppingCallback, PrinterCallback

from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.config import build_lora_config
from trainer_core.training.divergence import DivergenceGuard

NEEDS_EVAL = "early_stopping_patience needs evaluation data: set val_size or give local_eval_datasets"


def run_callbacks(
    request: TrainingStartRequest, callbacks: list[Any], has_eval: bool, collapse: bool = True
) -> list[Any]:
    """``callbacks``, then transformers' ``EarlyStoppingCallback`` (``early_stopping_patience`` > 0)
    and the ``DivergenceGuard`` (``stop_on_divergence``; ``collapse``: its rule for a cross-entropy
    loss stuck at a uniform guess over the vocabulary, SFT only). Raises ValueError
    (``NEEDS_EVAL``) for early stopping without evaluation data."""
    found = list(callbacks)
    if request.early_stopping_patience > 0:
        if not has_eval:
            raise ValueError(NEEDS_EVAL)
        found.append(EarlyStoppingCallback(request.early_stopping_patience, request.early_stopping_threshold))
    if request.stop_on_divergence:
        found.append(DivergenceGuard(collapse=collapse))
    return found


def new_lora(request: TrainingStartRequest, model: Any) -> Optional[Any]:
    """The LoRA config for ``model`` (PEFT's ``LoraConfig``; None for full fine-tuning), or None
    when ``model`` already carries an adapter (``adapter_name_or_path``): that one trains on."""
    return None if hasattr(model, "peft_config") else build_lora_config(request, model)


def add_lora(request: TrainingStartRequest, model: Any, task_type: bool = True) -> tuple[Any, bool]:
    """(``model`` wrapped in a PEFT LoRA of ``request``'s settings, True) for a lora / qlora run with
    a new adapter; (``model``, False) for a full fine-tune or an adapter loaded to train on (see
    ``new_lora``). ``task_type`` False: a plain ``PeftModel`` (no task type), whose forward passes a
    speech model's inputs (``input_features``, ``input_values``, ...) as they are. Raises TargetError."""
    import dataclasses

    from peft import get_peft_model

    config = new_lora(request, model)
    if config is None:
        return model, False
    return get_peft_model(model, config if task_type else dataclasses.replace(config, task_type=None)), True


def finish(trainer: Any, request: TrainingStartRequest, device: str, new_adapter: bool) -> Any:
    """The studio's settings on a built TRL trainer: no progress printed to stdout (it goes to the
    event queue), the embeddings' learning rate (``EmbeddingRate``), LoftQ on a new QLoRA adapter
    (``use_loftq``; ``training.loftq``) and the improvement a new best checkpoint needs
    (``early_stopping_threshold`` while early stopping is on), and fp32 master copies of the trained
    weights over a bf16 base (``master_weights_fp32``). Returns ``trainer``."""
    trainer.remove_callback(PrinterCallback)
    trainer.embedding_learning_rate = request.embedding_learning_rate
    if request.use_loftq and new_adapter:
        from trainer_core.training.loftq import apply_loftq

        apply_loftq(trainer.model, device)
    trainer.best_threshold = request.early_stopping_threshold if request.early_stopping_patience > 0 else 0.0
    if request.training_type.value != "full":  # a full fine-tune on a GPU trains its bf16 weights as before
        master_weights_fp32(trainer.model)
    return trainer


def master_weights_fp32(model: Any) -> int:
    """Store every trained parameter of ``model`` in fp32 (the master weights of mixed precision):
    PEFT makes its adapters fp32 over a bf16 base, but ``modules_to_save`` copies (and an embedding
    trained beside them) keep the base's bf16, where AdamW's small updates would round away. Frozen
    weights are left as loaded. Returns how many parameters were cast."""
    import torch

    cast = 0
    for param in model.parameters():
        if param.requires_grad and param.dtype in (torch.bfloat16, torch.float16):
            param.data = param.data.float()
            cast += 1
    return cast
