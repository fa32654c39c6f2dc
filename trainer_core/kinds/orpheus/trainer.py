"""An Orpheus-style run's trainer: transformers' ``Trainer`` over rows already encoded
(``data.prepare_orpheus_data``: ``input_ids``, ``prompt_length``), padded on the right by
``SpeechCollator`` with labels on the speech alone; the model is a causal LM (LoRA as for text:
``training.wiring.new_lora``, or a full fine-tune), with the studio's saves, callbacks and settings
(``training.safe_saves``, ``training.wiring``) and the text-to-speech kind's arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import torch
from transformers import Trainer

from trainer_core.kinds.orpheus.tokens import OrpheusTokens
from trainer_core.kinds.text_to_speech.trainer import training_arguments
from trainer_core.training.safe_saves import SafeSaves
from trainer_core.training.wiring import add_lora, finish, run_callbacks

IGNORE = -100  # a label position not scored


class SpeechCollator:
    """Rows ``{"input_ids": [int], "prompt_length": int, ...}`` -> ``input_ids``, ``attention_mask``
    and ``labels`` (B, T), padded on the right with the tokenizer's Orpheus pad token; labels are
    the ids after each prompt (the codes, end_of_speech, end_of_ai), ``IGNORE`` elsewhere."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        longest = max(len(row["input_ids"]) for row in rows)
        shape = (len(rows), longest)
        input_ids = torch.full(shape, self.pad_id, dtype=torch.long)
        attention = torch.zeros(shape, dtype=torch.long)
        labels = torch.full(shape, IGNORE, dtype=torch.long)
        for i, row in enumerate(rows):
            ids, prompt = torch.tensor(row["input_ids"], dtype=torch.long), int(row["prompt_length"])
            input_ids[i, : len(ids)] = ids
            attention[i, : len(ids)] = 1
            labels[i, prompt : len(ids)] = ids[prompt:]
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


class SpeechTrainer(SafeSaves, Trainer):
    """``Trainer`` whose saves are staged and checked by ``SafeSaves`` (the final folder gets the
    tokenizer, which names the run's codec)."""


def build_orpheus_trainer(
    request: Any,
    model: Any,
    data: Any,
    output_dir: Path,
    device: str,
    callbacks: list[Any],
    run_name: Optional[str] = None,
) -> SpeechTrainer:
    """The trainer of an Orpheus-style run: ``model`` (LoRA added here unless full), ``data``
    (``data.ClipSplits`` of encoded rows, its processor the tokenizer) and the studio's callbacks
    after ``callbacks``. Raises TargetError, ValueError (early stopping without evaluation data)."""
    model, new_adapter = add_lora(request, model)
    has_eval = data.eval is not None
    trainer = SpeechTrainer(
        model=model,
        args=training_arguments(request, output_dir, device, has_eval, run_name),
        train_dataset=data.train,
        eval_dataset=data.eval,
        data_collator=SpeechCollator(OrpheusTokens.of(data.processor).pad),
        processing_class=data.processor,
        callbacks=run_callbacks(request, callbacks, has_eval, collapse=False),
    )
    return finish(trainer, request, device, new_adapter)
