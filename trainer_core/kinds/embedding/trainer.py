"""An embedding run's model and trainer: the embedder loaded one way (``loading``), LoRA on its
transformer (PEFT ``FEATURE_EXTRACTION``, targets found as for text), and sentence-transformers'
``SentenceTransformerTrainer`` with the studio's saves, callbacks and settings (``training.wiring``,
``training.safe_saves``) and the shared hyperparameters (``training.config.training_args``)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any, Optional

import torch
from sentence_transformers.sentence_transformer.trainer import SentenceTransformerTrainer
from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments
from transformers.trainer import TRAINING_ARGS_NAME

from trainer_core.kinds.embedding.check import check_training_type
from trainer_core.kinds.embedding.evaluators import build_evaluator, progress_metrics
from trainer_core.kinds.embedding.loading import ADAPTER_CONFIG, load_embedder, save_embedder
from trainer_core.kinds.embedding.losses import batch_sampler, build_loss, chosen_loss
from trainer_core.training.config import build_lora_config, training_args
from trainer_core.training.safe_saves import SafeSaves
from trainer_core.training.wiring import finish, run_callbacks
from trainer_core.vocabulary import TrainingType

ADAPTER_WEIGHTS = "adapter_model.safetensors"


class EmbeddingTrainer(SafeSaves, SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` whose saves (checkpoints and the final folder) are
    ``loading.save_embedder``'s (a LoRA run: module files and the adapter alone), staged and checked
    by ``SafeSaves``; its evaluators' metrics are logged again under the progress events' names."""

    def add_model_card_callback(self, default_args_dict: dict[str, Any]) -> None:
        """None: the library's model-card callback (its "widget examples" computed at train begin,
        a README.md in every save) is left out; the studio writes the card when it exports
        (``kinds.embedding.card``)."""

    def save_final(self, output_dir: Path) -> None:
        """``SafeSaves.save_final``, then the empty ``eval/`` folder the library's evaluation makes
        (its evaluators write no CSV here) taken away."""
        super().save_final(output_dir)
        with contextlib.suppress(OSError):  # absent, or not empty: left as it is
            (Path(output_dir) / "eval").rmdir()

    def _save(self, output_dir: Optional[str] = None, state_dict: Any = None) -> None:  # noqa: D102
        folder = Path(output_dir or self.args.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        save_embedder(self.model, folder)
        torch.save(self.args, folder / TRAINING_ARGS_NAME)

    def _load_from_checkpoint(self, checkpoint_path: str, model: Any = None) -> None:
        """Resume (or load the best checkpoint): a LoRA checkpoint's adapter weights into the
        adapter being trained; a whole checkpoint as sentence-transformers loads it."""
        if not (Path(checkpoint_path) / ADAPTER_CONFIG).is_file():
            return super()._load_from_checkpoint(checkpoint_path)
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        weights = load_file(os.path.join(checkpoint_path, ADAPTER_WEIGHTS))
        set_peft_model_state_dict(self.model[0].model, weights)

    def log(self, logs: dict[str, float], start_time: Optional[float] = None) -> None:  # noqa: D102
        super().log(progress_metrics(logs), start_time)


def load_embedding_model(path: Path, request: Any, device: str) -> Any:
    """The ``SentenceTransformer`` of ``path`` for ``request`` on ``device`` (frozen weights in the
    dtype ``models.precision`` chooses for a LoRA run; fp32 for full), its texts cut at
    ``max_seq_length`` tokens (or the model's own limit, where lower). Raises Refusal for qlora
    (field ``training_type``)."""
    from trainer_core.models.precision import request_precision, torch_dtype

    check_training_type(request)
    weights = request_precision(request, device).weights if request.training_type == TrainingType.lora else "fp32"
    model = load_embedder(path, device, dtype=torch_dtype(weights))
    model.max_seq_length = min(request.max_seq_length, model.max_seq_length or request.max_seq_length)
    return model


def add_lora(request: Any, model: Any) -> Optional[Any]:
    """Wrap ``model``'s transformer (``model[0].model``) in a PEFT ``FEATURE_EXTRACTION`` LoRA of
    ``request``'s ``lora_r`` / ``lora_alpha`` / ``lora_dropout`` / targets (``build_lora_config``);
    returns the config, None for a full fine-tune. Raises TargetError as ``build_lora_config``."""
    from peft import get_peft_model

    body = model[0]
    config = build_lora_config(request, body.model)
    if config is None:
        return None
    config = dataclasses.replace(config, task_type="FEATURE_EXTRACTION")
    body.model = get_peft_model(body.model, config)
    return config


def training_arguments(
    request: Any, output_dir: Path, device: str, has_eval: bool, loss: Any, run_name: Optional[str]
) -> SentenceTransformerTrainingArguments:
    """``SentenceTransformerTrainingArguments``: the shared settings (``training_args``), the batch
    sampler ``loss`` wants and ``query_prompt`` before each anchor. With held-out rows a new run is
    evaluated once before its first step (``eval_on_start``): the untrained model is the base (LoRA's
    B starts at zero), so the eval chart's lines start at step 0 from the base's figures; the early
    stopping and best-checkpoint bookkeeping count evaluations from the first save on, as before."""
    return SentenceTransformerTrainingArguments(
        **training_args(request, output_dir, device, has_eval, run_name),
        eval_on_start=has_eval and not request.resume_from_checkpoint,
        batch_sampler=batch_sampler(loss),
        prompts={"anchor": request.query_prompt} if request.query_prompt else None,
    )


def build_embedding_trainer(
    request: Any,
    model: Any,
    data: Any,
    output_dir: Path,
    device: str,
    callbacks: list[Any],
    run_name: Optional[str] = None,
) -> EmbeddingTrainer:
    """The trainer of an embedding run: ``model`` (a ``SentenceTransformer``; LoRA added here unless
    full), ``data`` (``data.EmbeddingData``), the loss of its shape, the held-out evaluator, and
    the studio's callbacks (divergence guard, early stopping) after ``callbacks``. Raises Refusal
    (a loss that does not fit, Matryoshka sizes too large) and TargetError."""
    loss_name = chosen_loss(request, data.format)
    new_adapter = add_lora(request, model) is not None
    has_eval = data.eval is not None
    trainer = EmbeddingTrainer(
        model=model,
        args=training_arguments(request, output_dir, device, has_eval, loss_name, run_name),
        train_dataset=data.train,
        eval_dataset=data.eval,
        loss=build_loss(request, model, data.format),
        evaluator=build_evaluator(data.eval, data.format, request.query_prompt, request.batch_size)
        if has_eval
        else None,
        callbacks=run_callbacks(request, callbacks, has_eval, collapse=False),
    )
    return finish(trainer, request, device, new_adapter)
