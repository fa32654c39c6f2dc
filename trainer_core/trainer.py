"""Our TRL trainer: ``SFTTrainer`` with the plain causal-LM loss and no per-step metric work.

TRL 1.16's ``SFTTrainer.compute_loss`` runs a fused LM-head path that also computes per-token
entropy and top-1 accuracy on every step (logged as ``entropy`` / ``mean_token_accuracy``). Nobody
here asked for those; the model's own loss over the ``labels`` we built (-100 outside answers) is
the same mean negative log-likelihood: over 6 steps on alpaca_en_demo (batch 4, 256 tokens) both
logged identical losses to 4 decimals. Its speed-up is for the throughput benchmark to measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import PrinterCallback, Trainer
from trl import SFTTrainer

from trainer_core.config import build_lora_config, build_sft_config
from trainer_core.schemas import TrainingStartRequest


class LeanSFTTrainer(SFTTrainer):
    """``SFTTrainer`` whose loss is ``transformers.Trainer``'s (model(**inputs).loss, token-weighted
    across gradient accumulation via ``num_items_in_batch``)."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: D102
        return Trainer.compute_loss(self, model, inputs, return_outputs=return_outputs,
                                    num_items_in_batch=num_items_in_batch)


def build_trainer(request: TrainingStartRequest, model: Any, tokenizer: Any, train: Any, eval_split: Any,
                  output_dir: Path, device: str, callbacks: list[Any]) -> SFTTrainer:
    """The trainer the worker (and the throughput benchmark) runs for ``request``."""
    args = build_sft_config(request, output_dir, device, has_eval=eval_split is not None)
    trainer = LeanSFTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=eval_split,
        processing_class=tokenizer,
        peft_config=build_lora_config(request),
        callbacks=callbacks,
    )
    trainer.remove_callback(PrinterCallback)  # progress goes to the event queue, not stdout
    return trainer
