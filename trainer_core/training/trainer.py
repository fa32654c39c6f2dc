"""Our TRL trainer: ``SFTTrainer`` on padding-free batches, with a loss computed only where it counts.

Three departures from a stock ``SFTTrainer`` (each measured by ``bench/throughput.py``; figures in
docs/BENCHMARKS.md):

- Padding-free batches (TRL's ``padding_free`` collator): the B rows of a batch are laid end to end
  in one row of sum(n_i) tokens, so no compute goes to padding (31 % of the tokens of a batch of 4
  alpaca rows cut at 256 are padding otherwise).
- Per-row attention (``trainer_core.training.attention``) instead of a dense block-diagonal mask.
- Saves that never leave half a checkpoint (each is written into a ``.partial-*`` staging folder and
  renamed into place, see ``resume.py``) and never save non-finite weights (``DivergenceError``).
- The loss: TRL 1.16's ``compute_loss`` runs a fused LM-head path that also computes per-token
  entropy and top-1 accuracy every step. We compute the LM head only at the positions whose next
  token has a label (answers, with ``train_on_completions``) via transformers' ``logits_to_keep``,
  and take the token-mean cross-entropy over the same labels: the same loss (equal to 4 decimals
  on alpaca batches) for less work.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any, Optional

import torch
import torch.nn.functional as F
from transformers import EarlyStoppingCallback, PrinterCallback, Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import SFTTrainer

from trainer_core.training.attention import register_varlen_sdpa
from trainer_core.training.config import build_lora_config, build_sft_config
from trainer_core.training.checkpoints import publish_files, publish_folder, staging_dir
from trainer_core.schemas import TrainingStartRequest

DIVERGENCE_HINT = ("Lower learning_rate, clip gradients with max_grad_norm (e.g. 1.0), or check the data; "
                   "the last good checkpoint is kept.")


class DivergenceError(RuntimeError):
    """Training produced a NaN or infinite loss, gradient norm or weight; the message names the step
    and the value and is written for the user."""


def divergence_message(step: int, what: str) -> str:
    """The user's message for a divergence at optimizer step ``step``; ``what`` e.g. "loss is nan"."""
    return f"Training diverged at step {step}: {what}. {DIVERGENCE_HINT}"


class DivergenceGuard(TrainerCallback):
    """Raises DivergenceError at the first logged step whose loss or grad_norm is NaN or infinite
    (put it after the progress callback, so that step is still reported)."""

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: D102
        for key in ("loss", "grad_norm"):
            value = (logs or {}).get(key)
            if isinstance(value, (int, float)) and not math.isfinite(value):
                raise DivergenceError(divergence_message(state.global_step, f"{key} is {value}"))


def answer_loss(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> tuple[torch.Tensor, Any]:
    """Causal-LM cross-entropy (nats per labelled token) of a padding-free batch (``input_ids`` and
    ``labels`` of shape (1, T)), with logits computed only at the K positions t whose target
    ``labels[t + 1]`` is not -100. Divides the summed loss by ``num_items_in_batch`` (the labelled
    tokens of the whole accumulated batch, counted by ``Trainer``) when given, else by K.
    Returns (loss, model outputs with logits of shape (1, K, vocab))."""
    inputs = dict(inputs)
    labels = inputs.pop("labels")
    targets = labels[0, 1:]
    keep = (targets != -100).nonzero().squeeze(-1)
    outputs = model(**inputs, use_cache=False, logits_to_keep=keep)
    total = F.cross_entropy(outputs.logits[0].float(), targets[keep], reduction="sum")
    denominator = num_items_in_batch if num_items_in_batch is not None else max(keep.numel(), 1)
    return total / denominator, outputs


class LeanSFTTrainer(SFTTrainer):
    """``SFTTrainer`` whose loss is ``answer_loss`` for padding-free batches (batch dimension 1) and
    ``transformers.Trainer``'s otherwise; no entropy / token-accuracy metrics."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: D102
        if inputs.get("labels") is None or inputs["input_ids"].shape[0] != 1:
            return Trainer.compute_loss(self, model, {**inputs, "use_cache": False}, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        if "cu_seq_lens_q" in inputs:  # row offsets back on the CPU once per step, not once per layer
            inputs = {**inputs, "cu_seq_lens_q": inputs["cu_seq_lens_q"].cpu()}
        loss, outputs = answer_loss(model, inputs, num_items_in_batch)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:  # as Trainer.compute_loss
            loss = loss * (self.accelerator.num_processes // self.get_tp_size() if self.args.n_gpu <= 1 else self.args.n_gpu)
        return (loss, outputs) if return_outputs else loss

    # ----- saves: whole or not at all, and never non-finite weights -----
    _staging: Optional[Path] = None  # while a checkpoint is saved: the folder Trainer writes it into

    def check_finite_weights(self) -> None:
        """Raise DivergenceError (naming the step and a parameter) if any trainable parameter holds a
        NaN or inf; one device sync for all parameters."""
        params = [(name, p) for name, p in self.model.named_parameters() if p.requires_grad]
        flags = [torch.isfinite(p).all() for _, p in params]
        if not flags or torch.stack([f.to(flags[0].device) for f in flags]).all().item():
            return
        bad = next(name for name, p in params if not torch.isfinite(p).all().item())
        what = f"the trained weights hold NaN or inf values (first in {bad}), so they were not saved"
        raise DivergenceError(divergence_message(self.state.global_step, what))

    def _get_output_dir(self, trial: Any) -> str:  # noqa: D102 - Trainer's hook, redirected while saving
        return str(self._staging) if self._staging is not None else super()._get_output_dir(trial)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        """Trainer's checkpoint, written into ``.partial-checkpoint-N/checkpoint-N`` and renamed to
        ``checkpoint-N`` once complete. Raises DivergenceError instead of saving non-finite weights.
        (Trainer's rotation by ``save_total_limit`` sees only the staging folder; we do not set it.)"""
        self.check_finite_weights()
        run_dir = Path(super()._get_output_dir(trial))
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        self._staging = staging_dir(run_dir, name)
        shutil.rmtree(self._staging, ignore_errors=True)
        try:
            super()._save_checkpoint(model, trial)
            if self._point_best_at(run_dir) and self.args.should_save:
                self.state.save_to_json(str(self._staging / name / "trainer_state.json"))
            publish_folder(self._staging / name, run_dir / name)
        finally:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None

    def _point_best_at(self, run_dir: Path) -> bool:
        """Trainer recorded the best checkpoint (``load_best_model_at_end``) under the staging folder
        it saved into; point ``state.best_model_checkpoint`` at the published ``checkpoint-N`` of
        ``state.best_global_step`` instead. Returns whether there is a best step to point at."""
        if not self.state.best_global_step:
            return False
        self.state.best_model_checkpoint = str(run_dir / f"{PREFIX_CHECKPOINT_DIR}-{self.state.best_global_step}")
        return True

    best_threshold: float = 0.0  # a new best eval_loss must beat the old one by more (early_stopping_threshold)

    def _determine_best_metric(self, metrics: dict[str, float], trial: Any) -> bool:
        """Trainer's best-checkpoint tracking, except that a new best must beat the old by more than
        ``best_threshold``: the rule ``EarlyStoppingCallback`` counts improvements by, so the best
        checkpoint is the last evaluation that counted as an improvement (a drop within float noise
        does not move it)."""
        value, best = metrics.get("eval_loss"), self.state.best_metric
        if self.best_threshold and value is not None and best is not None and not best - value > self.best_threshold:
            return False
        return super()._determine_best_metric(metrics, trial)

    def save_model(self, output_dir: Optional[str] = None, _internal_call: bool = False) -> None:
        """Trainer's ``save_model``, refused (DivergenceError) when the weights are not finite."""
        if not _internal_call:  # checkpoint saves were checked by _save_checkpoint
            self.check_finite_weights()
        super().save_model(output_dir, _internal_call=_internal_call)

    def save_final(self, output_dir: Path) -> None:
        """Save the trained model and tokenizer into ``output_dir`` (PEFT: the adapter) via a staging
        folder, so a kill leaves either the old files or complete new ones, file by file."""
        staged = staging_dir(output_dir, "final")
        shutil.rmtree(staged, ignore_errors=True)
        self.save_model(str(staged))
        self.processing_class.save_pretrained(str(staged))
        publish_files(staged, output_dir)


def build_trainer(request: TrainingStartRequest, model: Any, tokenizer: Any, train: Any, eval_split: Any,
                  output_dir: Path, device: str, callbacks: list[Any], run_name: Optional[str] = None) -> SFTTrainer:
    """The trainer the worker (and the throughput benchmark) runs for ``request``. Switches ``model``
    to per-row attention (``sdpa_varlen``; a runtime setting that saved configs do not record). With
    ``request.stop_on_divergence`` a ``DivergenceGuard`` runs after ``callbacks``; with
    ``request.early_stopping_patience`` > 0 an ``EarlyStoppingCallback`` too (ValueError without
    ``eval_split``). (TRL seeds every RNG with ``random_seed`` before it initialises LoRA, so a rerun
    repeats the initialisation, the data order and the dropout masks.) ``run_name`` (the job id) names
    the run in the trackers of ``request.report_to`` (set up first: ``trackers.prepare_trackers``)."""
    args = build_sft_config(request, output_dir, device, has_eval=eval_split is not None, run_name=run_name)
    model.set_attn_implementation(register_varlen_sdpa())
    if request.early_stopping_patience > 0:
        if eval_split is None:
            raise ValueError("early_stopping_patience needs evaluation data: set val_size or give local_eval_datasets")
        callbacks = [*callbacks, EarlyStoppingCallback(request.early_stopping_patience, request.early_stopping_threshold)]
    trainer = LeanSFTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=eval_split,
        processing_class=tokenizer,
        peft_config=build_lora_config(request),
        callbacks=[*callbacks, DivergenceGuard()] if request.stop_on_divergence else callbacks,
    )
    trainer.remove_callback(PrinterCallback)  # progress goes to the event queue, not stdout
    trainer.best_threshold = request.early_stopping_threshold if request.early_stopping_patience > 0 else 0.0
    return trainer


def early_stop_reason(trainer: Trainer) -> Optional[str]:
    """Why ``trainer`` stopped before its last step when its ``EarlyStoppingCallback`` ended the run
    (e.g. "Stopped early at step 40: eval_loss did not improve by more than 0.0 for 3 evaluations
    (best 1.2340 at step 20)"); None when it did not (no callback, or the run went on to the end)."""
    stopper = next((c for c in trainer.callback_handler.callbacks if isinstance(c, EarlyStoppingCallback)), None)
    state = trainer.state
    if (stopper is None or stopper.early_stopping_patience_counter < stopper.early_stopping_patience
            or state.global_step >= state.max_steps):
        return None
    best = f" (best {state.best_metric:.4f} at step {state.best_global_step})" if state.best_metric is not None else ""
    return (f"Stopped early at step {state.global_step}: eval_loss did not improve by more than "
            f"{stopper.early_stopping_threshold} for {stopper.early_stopping_patience} evaluations{best}")
