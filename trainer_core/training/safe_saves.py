"""Saves that never leave half a checkpoint and never hold non-finite weights, for every trainer we
run (``LeanSFTTrainer`` and the preference trainers mix ``SafeSaves`` in before TRL's class).

Each checkpoint is written into a ``.partial-*`` staging folder and renamed into place
(``checkpoints.py``), and a save of NaN / inf weights raises ``DivergenceError`` instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Optional

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from trainer_core.process.disk_full import DiskFullError, disk_full_message, is_disk_full
from trainer_core.training.checkpoints import latest_checkpoint, publish_files, publish_folder, staging_dir

DIVERGENCE_HINT = (
    "Lower learning_rate, clip gradients with max_grad_norm (e.g. 1.0), or check the data; "
    "the last good checkpoint is kept."
)


class DivergenceError(RuntimeError):
    """Training produced a NaN or infinite loss, gradient norm or weight; the message names the step
    and the value and is written for the user."""


def divergence_message(step: int, what: str) -> str:
    """The user's message for a divergence at optimizer step ``step``; ``what`` e.g. "loss is nan"."""
    return f"Training diverged at step {step}: {what}. {DIVERGENCE_HINT}"


class SafeSaves:
    """A mixin for ``transformers.Trainer`` subclasses (put it first in the bases): whole saves,
    never non-finite weights, and a best checkpoint that must beat the old by ``best_threshold``."""

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
        (Trainer's rotation by ``save_total_limit`` sees only the staging folder; we do not set it.)
        With several processes every one writes its part (Trainer: ``rng_state_<rank>.pth``) and the
        main one prepares and publishes the folder, between barriers. A full disk raises DiskFullError
        once the partial save is removed; the earlier checkpoints stay as they were."""
        self.check_finite_weights()
        run_dir = Path(super()._get_output_dir(trial))
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        main = self.args.should_save
        self._staging = staging_dir(run_dir, name)
        if main:
            shutil.rmtree(self._staging, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        full: Optional[Exception] = None
        try:
            super()._save_checkpoint(model, trial)
            self.accelerator.wait_for_everyone()
            if self._point_best_at(run_dir) and main:
                self.state.save_to_json(str(self._staging / name / "trainer_state.json"))
            if main:
                publish_folder(self._staging / name, run_dir / name)
        except Exception as exc:
            if not is_disk_full(exc, run_dir):  # judged before the partial files are removed
                raise
            full = exc
        finally:
            if main:
                shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        if full is not None:
            raise DiskFullError(_full_message(f"the checkpoint at step {self.state.global_step}", run_dir)) from full

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
        folder, so a kill leaves either the old files or complete new ones, file by file. With several
        processes, all take part and the main one writes."""
        staged, main = staging_dir(output_dir, "final"), self.args.should_save
        if main:
            shutil.rmtree(staged, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        try:
            self.save_model(str(staged))  # every process (FSDP / DeepSpeed gather); Trainer writes on the main one
            if main:
                self.processing_class.save_pretrained(str(staged))
                publish_files(staged, output_dir)
        except Exception as exc:
            if not is_disk_full(exc, output_dir):
                raise
            shutil.rmtree(staged, ignore_errors=True)
            raise DiskFullError(_full_message("the final weights", Path(output_dir))) from exc
        self.accelerator.wait_for_everyone()


def _full_message(what: str, run_dir: Path) -> str:
    """The disk-full message of a save into ``run_dir``, naming the checkpoint kept to resume from."""
    kept = latest_checkpoint(run_dir)
    if kept is None:
        return disk_full_message(what, run_dir, "No earlier checkpoint was saved", "start the run again")
    return disk_full_message(
        what, run_dir, f"The previous checkpoint {kept.name} is kept as it was", f"resume the run from {kept.name}"
    )
