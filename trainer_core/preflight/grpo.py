"""The check's line on a GRPO run: how many completions each step samples and what rewards them."""

from __future__ import annotations

from typing import Optional

from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingMethod


def grpo_summary(request: TrainingStartRequest, columns: list[str]) -> Optional[str]:
    """E.g. "GRPO: 4 answers to each of 1 prompt per step (4 completions of at most 128 tokens);
    rewards: numeric_match:answer x 1, format x 0.5; KL weight (beta) 0.04". None for other methods;
    the rewards part is left out when they cannot be built (``rules.rewards_unusable`` says why)."""
    if request.training_method != TrainingMethod.grpo:
        return None
    from trainer_core.rewards.build import RewardError, chosen_rewards, labels

    completions = request.batch_size * request.gradient_accumulation_steps
    prompts = completions // request.num_generations
    line = (
        f"GRPO: {request.num_generations} answers to each of {prompts} prompt{'s' if prompts != 1 else ''} per step "
        f"({completions} completions of at most {request.max_completion_length} tokens, temperature "
        f"{request.temperature:g})"
    )
    try:
        specs = chosen_rewards(request, [c for c in columns if not c.startswith("_")], code_names=None)
    except RewardError:
        specs = []
    if specs:
        line += "; rewards: " + ", ".join(f"{name} x {spec.weight:g}" for name, spec in zip(labels(specs), specs))
    elif request.reward_file:
        line += "; rewards: every function of the reward file"
    kl = f"KL weight (beta) {request.beta:g}" if request.beta else "no KL term (beta 0: no reference model)"
    return f"{line}; {kl}"
