"""Preference training (DPO, ORPO, KTO) with TRL's own trainers, made as safe as our SFT trainer.

- DPO: ``trl.DPOTrainer`` (Rafailov et al. 2023, https://arxiv.org/abs/2305.18290); with LoRA the
  reference model is the base with the adapter disabled, or, when the run starts from an earlier
  adapter (``adapter_name_or_path``), a frozen copy of that adapter (TRL adds it as "ref").
- ORPO: ``trl.experimental.orpo.ORPOTrainer`` (Hong et al. 2024, https://arxiv.org/abs/2403.07691):
  no reference model; the loss is the answer's NLL plus ``beta`` x the odds-ratio term.
- KTO: ``trl.KTOTrainer`` (Ethayarajh et al. 2024, https://arxiv.org/abs/2402.01306) on rows rated
  desirable / undesirable, weighted by ``desirable_weight`` / ``undesirable_weight``.

Each trainer class gets our checkpoint safety (``SafeSaves``: whole saves, never non-finite weights)
and the same callbacks as SFT (progress, divergence guard, early stopping). TRL renders the
conversational rows through the model's chat template and scores only the answer tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import TrainingProgress
from trainer_core.training.config import training_args
from trainer_core.training.embedding_rate import EmbeddingRate
from trainer_core.training.safe_saves import SafeSaves
from trainer_core.training.wiring import finish, new_lora, run_callbacks
from trainer_core.vocabulary import TrainingMethod

# TRL's logged metric -> our TrainingProgress field (train and eval; TRL prefixes eval ones "eval_")
PREFERENCE_METRICS = {
    "rewards/chosen": "rewards_chosen",
    "rewards/rejected": "rewards_rejected",
    "rewards/margins": "rewards_margins",
    "rewards/accuracies": "rewards_accuracies",
    "kl": "kl",
}
_PROGRESS_FIELDS = set(TrainingProgress.model_fields)


def preference_values(logs: dict[str, Any]) -> dict[str, float]:
    """The preference metrics in a Trainer ``logs`` dict as ``TrainingProgress`` fields (train ones
    as ``rewards_margins`` ..., eval ones as ``eval_rewards_margins`` / ``eval_rewards_accuracies``);
    non-finite values are left out (the divergence guard watches the loss)."""
    import math

    found: dict[str, float] = {}
    for theirs, ours in PREFERENCE_METRICS.items():
        for prefix in ("", "eval_"):
            value = logs.get(prefix + theirs)
            name = prefix + ours
            if isinstance(value, (int, float)) and math.isfinite(value) and name in _PROGRESS_FIELDS:
                found[name] = float(value)
    return found


def preference_config(
    request: TrainingStartRequest, output_dir: Path, device: str, has_eval: bool, run_name: Optional[str] = None
) -> Any:
    """TRL's config for ``request.training_method``: ``DPOConfig``, ``ORPOConfig`` or ``KTOConfig``
    with our common arguments (``config.training_args``: fp32 on CPU, logging every step, saves,
    trackers) and the method's own: ``beta``; DPO ``loss_type``; KTO ``desirable_weight`` /
    ``undesirable_weight``. ``max_length`` = ``max_seq_length`` caps prompt + answer (TRL cuts the
    answer's end, ``truncation_mode="keep_start"``, and drops rows whose prompt alone fills it).
    Dropout is off, LoRA dropout included (TRL's ``disable_dropout`` default: the policy's and the
    reference's log-probabilities must be computed alike), so ``lora_dropout`` has no effect here."""
    common = training_args(request, output_dir, device, has_eval, run_name)
    common.update(max_length=request.max_seq_length, beta=request.beta, include_num_input_tokens_seen="non_padding")
    if request.training_method == TrainingMethod.dpo:
        from trl import DPOConfig

        return DPOConfig(**common, loss_type=[request.loss_type])
    if request.training_method == TrainingMethod.orpo:
        from trl.experimental.orpo import ORPOConfig

        return ORPOConfig(**common)
    if request.training_method == TrainingMethod.kto:
        from trl import KTOConfig

        return KTOConfig(
            **common, desirable_weight=request.desirable_weight, undesirable_weight=request.undesirable_weight
        )
    raise ValueError(f"training_method {request.training_method.value!r} is not a preference method")


def trainer_class(method: TrainingMethod) -> type:
    """TRL's trainer for ``method`` with ``SafeSaves`` and ``EmbeddingRate`` mixed in."""
    if method == TrainingMethod.dpo:
        from trl import DPOTrainer as base
    elif method == TrainingMethod.orpo:
        from trl.experimental.orpo import ORPOTrainer as base
    elif method == TrainingMethod.kto:
        from trl import KTOTrainer as base
    else:
        raise ValueError(f"training_method {method.value!r} is not a preference method")
    return type(f"Safe{base.__name__}", (SafeSaves, EmbeddingRate, base), {})


def build_preference_trainer(
    request: TrainingStartRequest,
    model: Any,
    tokenizer: Any,
    train: Any,
    eval_split: Any,
    output_dir: Path,
    device: str,
    callbacks: list[Any],
    run_name: Optional[str] = None,
) -> Any:
    """The trainer the worker runs for a preference ``request``. ``model`` is the base model, or a
    ``PeftModel`` whose adapter (``adapter_name_or_path``) goes on training; then no new LoRA is
    added. ``train`` / ``eval_split`` are canonical preference rows (``data.preference``). Raises
    ValueError as ``trainer.build_trainer`` does (early stopping without evaluation data)."""
    args = preference_config(request, output_dir, device, has_eval=eval_split is not None, run_name=run_name)
    peft_config = new_lora(request, model)
    trainer = trainer_class(request.training_method)(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=eval_split,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=run_callbacks(request, callbacks, eval_split is not None, collapse=False),
    )
    return finish(trainer, request, device, peft_config is not None)
