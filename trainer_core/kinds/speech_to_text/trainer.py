"""A speech-to-text run's trainer: transformers' ``Seq2SeqTrainer`` over the kind's collator
(``collator.SpeechCollator``), LoRA on the model's linear layers (targets found as for text:
``training.config.build_lora_config``) or a full fine-tune, with the studio's saves, callbacks and
settings (``training.safe_saves``, ``training.wiring``) and the shared hyperparameters
(``training.config.training_args``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

from trainer_core.kinds.speech_to_text.collator import SpeechCollator
from trainer_core.training.config import training_args
from trainer_core.training.safe_saves import SafeSaves
from trainer_core.training.wiring import add_lora, finish, run_callbacks


class SpeechTrainer(SafeSaves, Seq2SeqTrainer):
    """``Seq2SeqTrainer`` whose saves are staged and checked by ``SafeSaves`` (the final folder gets
    the processor: feature extractor and tokenizer, with the run's language / task prompt)."""


def decoder_length(request: Any, model: Any) -> int:
    """Decoder tokens a row keeps: ``max_seq_length`` or the model's ``max_target_positions``
    (Whisper: 448), where lower."""
    limit = getattr(model.config, "max_target_positions", None) or request.max_seq_length
    return min(request.max_seq_length, limit)


def training_arguments(
    request: Any, output_dir: Path, device: str, has_eval: bool, run_name: Optional[str]
) -> Seq2SeqTrainingArguments:
    """``Seq2SeqTrainingArguments``: the shared settings (``training_args``); the rows' ``audio`` /
    ``text`` columns kept for the collator; evaluation by loss (no generation while training)."""
    return Seq2SeqTrainingArguments(
        **training_args(request, output_dir, device, has_eval, run_name),
        remove_unused_columns=False,
        predict_with_generate=False,
        label_names=["labels"],
    )


def build_speech_trainer(
    request: Any,
    model: Any,
    data: Any,
    output_dir: Path,
    device: str,
    callbacks: list[Any],
    run_name: Optional[str] = None,
) -> SpeechTrainer:
    """The trainer of a speech-to-text run: ``model`` (LoRA added here unless full), ``data``
    (``data.ClipSplits``, with its processor), the kind's collator, and the studio's callbacks (divergence guard, early
    stopping) after ``callbacks``. Raises TargetError, ValueError (early stopping without
    evaluation data)."""
    model.generation_config.forced_decoder_ids = None  # the prompt is the collator's, not forced
    model, new_adapter = add_lora(request, model, task_type=False)
    has_eval = data.eval is not None
    processor = data.processor
    collator = SpeechCollator(processor, request, decoder_length(request, model), request.max_audio_seconds)
    collator.dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    trainer = SpeechTrainer(
        model=model,
        args=training_arguments(request, output_dir, device, has_eval, run_name),
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=collator,
        processing_class=processor,
        callbacks=run_callbacks(request, callbacks, has_eval, collapse=False),
    )
    return finish(trainer, request, device, new_adapter)
