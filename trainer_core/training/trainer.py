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

from pathlib import Path
from typing import Any, Optional

import torch
import torch.nn.functional as F
from transformers import EarlyStoppingCallback, Trainer
from trl import SFTTrainer

from trainer_core.model_kind import kind_of
from trainer_core.models.precision import request_precision
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.attention import register_varlen_sdpa
from trainer_core.training.config import build_sft_config
from trainer_core.training.embedding_rate import EmbeddingRate
from trainer_core.training.kernels import liger_applies
from trainer_core.training.packed_rows import keeps_packed_rows_apart
from trainer_core.training.safe_saves import SafeSaves
from trainer_core.training.wiring import finish, new_lora, run_callbacks


def answer_loss(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> tuple[torch.Tensor, Any]:
    """Causal-LM cross-entropy (nats per labelled token) of a padding-free batch (``input_ids`` and
    ``labels`` of shape (1, T)), with logits computed only at the K positions t whose target
    ``labels[t + 1]`` is not -100. Divides the summed loss by ``num_items_in_batch`` (the labelled
    tokens of the whole accumulated batch, counted by ``Trainer``) when given, else by K.
    A model whose forward ignores ``logits_to_keep`` has its logits at those positions picked here.
    Returns (loss, model outputs with logits of shape (1, K, vocab), or (1, T, vocab) for such a model)."""
    inputs = dict(inputs)
    labels = inputs.pop("labels")
    targets = labels[0, 1:]
    keep = (targets != -100).nonzero().squeeze(-1)
    outputs = model(**inputs, use_cache=False, logits_to_keep=keep)
    logits = outputs.logits[0]
    if logits.shape[0] != keep.numel():  # a model that ignores logits_to_keep (Qwen2-Audio): every position
        logits = logits[keep]
    total = F.cross_entropy(logits.float(), targets[keep], reduction="sum")
    denominator = num_items_in_batch if num_items_in_batch is not None else max(keep.numel(), 1)
    return total / denominator, outputs


class LeanSFTTrainer(SafeSaves, EmbeddingRate, SFTTrainer):
    """``SFTTrainer`` whose loss is ``answer_loss`` for padding-free batches (batch dimension 1) and
    ``transformers.Trainer``'s otherwise (and with Liger's kernels, whose forward computes the loss); no entropy / token-accuracy metrics; saves by ``SafeSaves``;
    the embeddings' own learning rate by ``EmbeddingRate``."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: D102
        # Liger's fused linear cross-entropy (kernels.py) computes the loss inside the model's forward.
        if inputs.get("labels") is None or inputs["input_ids"].shape[0] != 1 or self.args.use_liger_kernel:
            return Trainer.compute_loss(
                self,
                model,
                {**inputs, "use_cache": False},
                return_outputs=return_outputs,
                num_items_in_batch=num_items_in_batch,
            )
        if "cu_seq_lens_q" in inputs:  # row offsets back on the CPU once per step, not once per layer
            inputs = {**inputs, "cu_seq_lens_q": inputs["cu_seq_lens_q"].cpu()}
        loss, outputs = answer_loss(model, inputs, num_items_in_batch)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:  # as Trainer.compute_loss
            loss = loss * (
                self.accelerator.num_processes // self.get_tp_size() if self.args.n_gpu <= 1 else self.args.n_gpu
            )
        return (loss, outputs) if return_outputs else loss


def use_training_attention(model: Any, fp32: bool = False) -> str:
    """Switch an SDPA ``model`` to the per-row ``sdpa_varlen`` for padding-free batches, where the
    architecture takes attention functions from transformers' registry; eager, flash_attention_2
    and SDPA models that do not (Falcon) keep packed rows apart through transformers' mask from
    the rows' ``position_ids`` (``models.attention_choice``). ``fp32``: a bf16 run on a CPU whose
    bf16 attention measured slower computes attention in fp32 (``models.precision``). Returns the
    implementation used."""
    if model.config._attn_implementation == "sdpa" and getattr(model, "_supports_attention_backend", False):
        model.set_attn_implementation(register_varlen_sdpa(fp32))
    return model.config._attn_implementation


def build_trainer(
    request: TrainingStartRequest,
    model: Any,
    tokenizer: Any,
    train: Any,
    eval_split: Any,
    output_dir: Path,
    device: str,
    callbacks: list[Any],
    run_name: Optional[str] = None,
) -> SFTTrainer:
    """The trainer the worker (and the throughput benchmark) runs for ``request``. Switches an SDPA
    ``model`` to per-row attention (``sdpa_varlen``; a runtime setting that saved configs do not
    record); eager and flash_attention_2 separate packed rows themselves (``attention_choice``). With
    ``request.stop_on_divergence`` a ``DivergenceGuard`` runs after ``callbacks``; with
    ``request.early_stopping_patience`` > 0 an ``EarlyStoppingCallback`` too (ValueError without
    ``eval_split``). On a GPU with Liger Kernel installed, Liger's fused linear cross-entropy for the
    families it patches (``kernels.liger_applies``). (TRL seeds every RNG with ``random_seed`` before it initialises LoRA, so a rerun
    repeats the initialisation, the data order and the dropout masks.) ``run_name`` (the job id) names
    the run in the trackers of ``request.report_to`` (set up first: ``trackers.prepare_trackers``).
    A ``model`` that already carries an adapter (``adapter_name_or_path``) trains it; no new one.
    A model kind with a collator of its own (``ModelKind.collator``: a vision model, whose processor
    is ``tokenizer``) trains canonical rows in padded batches that collator makes."""
    collator = kind_of(getattr(model, "config", None)).collator(tokenizer, request)
    if collator is not None:  # the kind's rows (e.g. with images): padded batches made by its collator
        rows_apart = True
    else:
        precision = request_precision(request, device)
        use_training_attention(
            model, fp32=device == "cpu" and precision.dtype == "bf16" and precision.attention == "fp32"
        )
        rows_apart = keeps_packed_rows_apart(model)
    liger = collator is None and liger_applies(model, device)
    args = build_sft_config(
        request,
        output_dir,
        device,
        has_eval=eval_split is not None,
        run_name=run_name,
        rows_apart=rows_apart,
        collated=collator is not None,
        liger=liger,
    )
    peft_config = new_lora(request, model)
    trainer = LeanSFTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=eval_split,
        data_collator=collator,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=run_callbacks(request, callbacks, eval_split is not None),
    )
    return finish(trainer, request, device, peft_config is not None)


def early_stop_reason(trainer: Trainer) -> Optional[str]:
    """Why ``trainer`` stopped before its last step when its ``EarlyStoppingCallback`` ended the run
    (e.g. "Stopped early at step 40: eval_loss did not improve by more than 0.0 for 3 evaluations
    (best 1.2340 at step 20)"); None when it did not (no callback, or the run went on to the end)."""
    stopper = next((c for c in trainer.callback_handler.callbacks if isinstance(c, EarlyStoppingCallback)), None)
    state = trainer.state
    if (
        stopper is None
        or stopper.early_stopping_patience_counter < stopper.early_stopping_patience
        or state.global_step >= state.max_steps
    ):
        return None
    best = f" (best {state.best_metric:.4f} at step {state.best_global_step})" if state.best_metric is not None else ""
    return (
        f"Stopped early at step {state.global_step}: eval_loss did not improve by more than "
        f"{stopper.early_stopping_threshold} for {stopper.early_stopping_patience} evaluations{best}"
    )
