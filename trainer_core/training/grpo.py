"""GRPO (Shao et al. 2024, https://arxiv.org/abs/2402.03300) with TRL's ``GRPOTrainer``, made as safe
as our other trainers: whole checkpoint saves that never hold non-finite weights (``SafeSaves``),
the embeddings' own learning rate (``EmbeddingRate``), the progress callback, the divergence guard
and early stopping.

Each step samples ``num_generations`` completions to each of ``batch_size x gradient_accumulation_steps
/ num_generations`` prompts with the policy, scores them with the run's rewards (``rewards.build``),
and raises the likelihood of the completions that beat their group's mean reward. With ``beta`` > 0
a KL penalty keeps the policy near the reference: the base model with the adapter disabled (LoRA),
or a frozen copy of the starting weights (full fine-tuning). The live table's samples
(``CompletionSample``) are the latest step's completions with their rewards.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

from trainer_core.rewards.schemas import CompletionSample
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import TrainingProgress
from trainer_core.training.config import training_args
from trainer_core.training.embedding_rate import EmbeddingRate
from trainer_core.training.safe_saves import SafeSaves
from trainer_core.training.wiring import finish, new_lora, run_callbacks

SAMPLES_SHOWN = 4  # completions per logged step in the live table
SAMPLE_CHARS = 600
# TRL's logged GRPO metric -> our TrainingProgress field ("rewards/<name>/mean" go to ``rewards``)
GRPO_METRICS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "completions/mean_length": "completion_length",
    "completions/clipped_ratio": "completions_clipped",
    "clip_ratio/region_mean": "clip_ratio",
}
_PROGRESS_FIELDS = set(TrainingProgress.model_fields)


def _finite(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def grpo_values(logs: dict[str, Any]) -> dict[str, Any]:
    """The GRPO metrics in a Trainer ``logs`` dict as ``TrainingProgress`` fields: ``reward``,
    ``reward_std``, ``completion_length`` (tokens), ``completions_clipped`` (share cut at
    ``max_completion_length``), ``clip_ratio`` and ``rewards`` (each function's mean, by
    name); eval ones prefixed ``eval_`` where the model has such a field. Non-finite values are left out."""
    found: dict[str, Any] = {}
    for theirs, ours in GRPO_METRICS.items():
        for prefix in ("", "eval_"):
            value = _finite(logs.get(prefix + theirs))
            if value is not None and prefix + ours in _PROGRESS_FIELDS:
                found[prefix + ours] = value
    per_function = {
        key[len("rewards/") : -len("/mean")]: _finite(value)
        for key, value in logs.items()
        if key.startswith("rewards/") and key.endswith("/mean")
    }
    if per_function:
        found["rewards"] = {name: value for name, value in per_function.items() if value is not None}
    return found


def grpo_config(
    request: TrainingStartRequest,
    output_dir: Path,
    device: str,
    has_eval: bool,
    reward_weights: list[float],
    run_name: Optional[str] = None,
) -> Any:
    """``trl.GRPOConfig`` for ``request``: ``training_args`` (fp32 on CPU, logging every step, saves,
    trackers) plus ``num_generations``, ``max_completion_length``, ``temperature``, ``beta``,
    ``loss_type`` (= ``grpo_loss_type``) and ``reward_weights``. Rows keep their extra columns for
    the rewards (``remove_unused_columns`` False); evaluation batches hold whole groups."""
    from trl import GRPOConfig

    common = training_args(request, output_dir, device, has_eval, run_name)
    groups = max(1, request.batch_size // request.num_generations)
    common["per_device_eval_batch_size"] = groups * request.num_generations
    return GRPOConfig(
        **common,
        num_generations=request.num_generations,
        max_completion_length=request.max_completion_length,
        temperature=request.temperature,
        beta=request.beta,
        loss_type=request.grpo_loss_type,
        reward_weights=reward_weights,
        remove_unused_columns=False,
        log_completions=False,  # TRL's rich table on stdout; the live table takes the samples instead
    )


class CompletionSamples:
    """Mixed into TRL's ``GRPOTrainer``: before each log, hand the latest step's completions
    (``SAMPLES_SHOWN`` of them, with their rewards) to every callback that has a ``samples`` slot."""

    def log(self, logs: dict[str, float], start_time: Optional[float] = None) -> None:  # noqa: D102
        samples = self.latest_samples() if "loss" in logs else []
        for callback in self.callback_handler.callbacks:
            if hasattr(callback, "samples"):
                callback.samples = samples
        super().log(logs, start_time)

    def latest_samples(self) -> list[dict[str, Any]]:
        """The first ``SAMPLES_SHOWN`` completions of the latest generation batch, one per prompt
        first (a group shares its prompt), as ``CompletionSample`` dicts."""
        from trainer_core.data.prompts import prompt_text
        from trainer_core.rewards.library import completion_text

        logged = self._logs
        prompts, completions = list(logged["prompt"]), list(logged["completion"])
        rewards = {name: list(values) for name, values in logged["rewards"].items()}
        advantages = list(logged["advantages"])
        weights = list(self.reward_weights.tolist())
        order = sorted(range(len(prompts)), key=lambda i: (i % self.num_generations, i))[:SAMPLES_SHOWN]
        out = []
        for i in order:
            by_name = {name: _finite(values[i]) if i < len(values) else None for name, values in rewards.items()}
            total = sum(w * v for w, v in zip(weights, by_name.values()) if v is not None)
            prompt = prompts[i]
            out.append(
                CompletionSample(
                    prompt=(prompt_text(prompt) if isinstance(prompt, list) else str(prompt))[:SAMPLE_CHARS],
                    completion=completion_text(completions[i])[:SAMPLE_CHARS],
                    rewards=by_name,
                    reward=total if by_name else None,
                    advantage=_finite(advantages[i]) if i < len(advantages) else None,
                ).model_dump()
            )
        return out


def grpo_trainer_class() -> type:
    """TRL's ``GRPOTrainer`` with ``CompletionSamples``, ``SafeSaves`` and ``EmbeddingRate`` mixed in."""
    from trl import GRPOTrainer

    return type("SafeGRPOTrainer", (CompletionSamples, SafeSaves, EmbeddingRate, GRPOTrainer), {})


def build_grpo_trainer(
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
    """The trainer the worker runs for a GRPO ``request`` on prompt rows (``data.prompts``):
    ``model`` is the base model or a ``PeftModel`` whose adapter (``adapter_name_or_path``, e.g. an
    SFT run's) goes on training. The rewards come from ``rewards.build`` (the request was admitted,
    so a ``reward_file`` passed the server's switch). Raises RewardError / RewardCodeError for
    rewards the data cannot feed, ValueError for early stopping without evaluation data."""
    from trainer_core.rewards.build import reward_functions

    functions, weights, _ = reward_functions(request, train.column_names, allowed=True)
    args = grpo_config(request, output_dir, device, eval_split is not None, weights, run_name)
    peft_config = new_lora(request, model)
    trainer = grpo_trainer_class()(
        model=model,
        reward_funcs=functions,
        args=args,
        train_dataset=train,
        eval_dataset=eval_split,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=run_callbacks(request, callbacks, eval_split is not None, collapse=False),
    )
    return finish(trainer, request, device, peft_config is not None)
