"""A text-to-speech run's trainer: transformers' ``Trainer`` over the kind's collator
(``collator.TtsCollator``: CSM's processor makes the batches, the model's ``forward`` returns the
backbone's and the depth decoder's loss), LoRA on the backbone's and the depth decoder's
projections (``targets.tts_targets``) or a full fine-tune, the Mimi codec frozen either way, with
the studio's saves, callbacks and settings (``training.safe_saves``, ``training.wiring``) and the
shared hyperparameters (``training.config.training_args``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from transformers import Trainer, TrainingArguments

from trainer_core.kinds.text_to_speech.collator import TtsCollator
from trainer_core.kinds.text_to_speech.targets import freeze_codec
from trainer_core.training.config import training_args
from trainer_core.training.safe_saves import SafeSaves
from trainer_core.training.wiring import add_lora, finish, run_callbacks


class TtsTrainer(SafeSaves, Trainer):
    """``Trainer`` whose saves are staged and checked by ``SafeSaves`` (the final folder gets the
    processor: feature extractor, tokenizer and chat template)."""


def training_arguments(
    request: Any, output_dir: Path, device: str, has_eval: bool, run_name: Optional[str]
) -> TrainingArguments:
    """``TrainingArguments``: the shared settings; the rows' columns kept for the collator."""
    return TrainingArguments(
        **training_args(request, output_dir, device, has_eval, run_name),
        remove_unused_columns=False,
        label_names=["labels"],
    )


def build_tts_trainer(
    request: Any,
    model: Any,
    data: Any,
    output_dir: Path,
    device: str,
    callbacks: list[Any],
    run_name: Optional[str] = None,
) -> TtsTrainer:
    """The trainer of a text-to-speech run: ``model`` (its codec frozen; LoRA added here unless
    full), ``data`` (``data.ClipSplits``, with its processor), the kind's collator and the studio's
    callbacks (divergence guard, early stopping) after ``callbacks``. Raises TargetError,
    ValueError (early stopping without evaluation data)."""
    freeze_codec(model)
    model, new_adapter = add_lora(request, model, task_type=False)
    has_eval = data.eval is not None
    collator = TtsCollator(data.processor, request.max_audio_seconds)
    collator.dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    trainer = TtsTrainer(
        model=model,
        args=training_arguments(request, output_dir, device, has_eval, run_name),
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=collator,
        processing_class=data.processor,
        callbacks=run_callbacks(request, callbacks, has_eval, collapse=False),
    )
    return finish(trainer, request, device, new_adapter)
