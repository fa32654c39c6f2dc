"""What the one job reports: the answer to a Start (``TrainingJobResponse``), each logged step
(``TrainingProgress``), the chart series (``MetricHistory``) and the job's state as clients see it
(``TrainingStatus``); and job ids (``new_job_id``)."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

from trainer_core.rewards.schemas import CompletionSample
from trainer_core.vocabulary import Phase


class TrainingJobResponse(BaseModel):
    """Answer to a start request: ``queued`` with the new job id, or ``error`` with the reason."""

    job_id: Optional[str] = None
    status: Literal["queued", "error"]
    message: str
    error: Optional[str] = None


class TrainingProgress(BaseModel):
    """One logged training (or evaluation) step. Times in seconds; ``num_tokens`` counts
    non-padding input tokens seen so far (over the whole run, resumes included).

    ``elapsed_seconds`` is training time, continued over resumes: the worker measures it from its
    own train begin, and the job runner adds the training seconds the run had logged up to the
    checkpoint it resumed from before the event reaches the history and the run store (the
    worker's own ``metrics.jsonl`` keeps the per-session value). Idle time between a Stop and a
    Resume is not in it. ``eta_seconds`` (with its spread ``eta_low_seconds`` / ``eta_high_seconds``)
    is the worker's estimate from this session's latest step times (``training.eta``)."""

    job_id: str
    step: int = Field(ge=0)
    total_steps: int = Field(ge=0)
    loss: Optional[float] = None
    learning_rate: Optional[float] = None
    grad_norm: Optional[float] = None
    eval_loss: Optional[float] = None
    epoch: Optional[float] = None
    progress_percent: float = Field(0.0, ge=0, le=100)
    elapsed_seconds: float = Field(0.0, ge=0, description="Training seconds, continued over resumes.")
    eta_seconds: Optional[float] = Field(
        None, description="Seconds left: the median of the latest 5 step times x steps left (None before 3 steps)."
    )
    eta_low_seconds: Optional[float] = Field(None, description="The range's low end (``training.eta.spread``).")
    eta_high_seconds: Optional[float] = Field(None, description="The range's high end (``training.eta.spread``).")
    num_tokens: Optional[int] = None
    # preference methods (TRL's rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracies, kl)
    rewards_chosen: Optional[float] = Field(
        None,
        description="Mean implicit reward of the chosen (desirable) answers: beta x log-probability ratio to the reference.",
    )
    rewards_rejected: Optional[float] = Field(
        None, description="Mean implicit reward of the rejected (undesirable) answers."
    )
    rewards_margins: Optional[float] = Field(None, description="Mean of chosen minus rejected reward.")
    rewards_accuracies: Optional[float] = Field(
        None, description="Share of pairs whose chosen reward beats the rejected one (0..1)."
    )
    kl: Optional[float] = Field(None, description="KTO: the batch's KL estimate between the model and the reference.")
    eval_rewards_margins: Optional[float] = None
    eval_rewards_accuracies: Optional[float] = None
    # GRPO (TRL's reward, reward_std, rewards/<name>/mean, completions/*, clip_ratio/region_mean; kl above)
    reward: Optional[float] = Field(None, description="GRPO: mean weighted reward of the step's completions.")
    reward_std: Optional[float] = Field(None, description="GRPO: standard deviation of that reward.")
    rewards: dict[str, float] = Field(
        default_factory=dict, description="GRPO: each reward function's mean (unweighted), by name."
    )
    completion_length: Optional[float] = Field(None, description="GRPO: mean completion length in tokens.")
    completions_clipped: Optional[float] = Field(
        None, description="GRPO: share of completions cut at max_completion_length (0..1)."
    )
    clip_ratio: Optional[float] = Field(
        None, description="GRPO: share of tokens whose probability ratio was clipped (0..1)."
    )
    eval_reward: Optional[float] = None
    # embedding runs: sentence-transformers' evaluators on the held-out rows (cosine similarity)
    eval_ndcg_at_10: Optional[float] = Field(None, description="Embedding: held-out retrieval nDCG@10 (0..1).")
    eval_mrr_at_10: Optional[float] = Field(None, description="Embedding: held-out retrieval MRR@10 (0..1).")
    eval_recall_at_1: Optional[float] = Field(
        None, description="Embedding: share of held-out queries whose passage ranks first (0..1)."
    )
    eval_recall_at_10: Optional[float] = Field(
        None, description="Embedding: share of held-out queries whose passage is in the top 10 (0..1)."
    )
    eval_spearman: Optional[float] = Field(
        None, description="Embedding: Spearman correlation of cosine similarity with the held-out scores (-1..1)."
    )
    samples: list[CompletionSample] = Field(
        default_factory=list, description="GRPO: a few of the step's completions with their rewards."
    )


PREFERENCE_SERIES = ("rewards_chosen", "rewards_rejected", "rewards_margins", "rewards_accuracies", "kl")
GRPO_SERIES = ("reward", "reward_std", "completion_length", "clip_ratio")
EMBEDDING_EVAL_SERIES = ("eval_ndcg_at_10", "eval_mrr_at_10", "eval_recall_at_1", "eval_recall_at_10", "eval_spearman")


class MetricHistory(BaseModel):
    """Series for the charts; each value list is aligned with the steps list beside it."""

    steps: list[int] = Field(default_factory=list)
    loss: list[Optional[float]] = Field(default_factory=list)
    learning_rate: list[Optional[float]] = Field(default_factory=list)
    grad_norm: list[float] = Field(default_factory=list)
    grad_norm_steps: list[int] = Field(default_factory=list)
    eval_loss: list[float] = Field(default_factory=list)
    eval_steps: list[int] = Field(default_factory=list)
    # preference runs only (empty otherwise), aligned with ``steps``
    rewards_chosen: list[Optional[float]] = Field(default_factory=list)
    rewards_rejected: list[Optional[float]] = Field(default_factory=list)
    rewards_margins: list[Optional[float]] = Field(default_factory=list)
    rewards_accuracies: list[Optional[float]] = Field(default_factory=list)
    kl: list[Optional[float]] = Field(default_factory=list)
    # GRPO runs only (empty otherwise), aligned with ``steps``; ``rewards``: each function's series
    reward: list[Optional[float]] = Field(default_factory=list)
    reward_std: list[Optional[float]] = Field(default_factory=list)
    completion_length: list[Optional[float]] = Field(default_factory=list)
    clip_ratio: list[Optional[float]] = Field(default_factory=list)
    rewards: dict[str, list[Optional[float]]] = Field(default_factory=dict)
    samples: list[CompletionSample] = Field(default_factory=list, description="The latest step's sampled completions.")
    # embedding runs only (empty otherwise): the held-out retrieval metrics, aligned with ``eval_steps``
    eval_ndcg_at_10: list[Optional[float]] = Field(default_factory=list)
    eval_mrr_at_10: list[Optional[float]] = Field(default_factory=list)
    eval_recall_at_1: list[Optional[float]] = Field(default_factory=list)
    eval_recall_at_10: list[Optional[float]] = Field(default_factory=list)
    eval_spearman: list[Optional[float]] = Field(default_factory=list)


class TrainingStatus(BaseModel):
    """The one job's state as any client sees it."""

    job_id: Optional[str] = None
    phase: Phase = Phase.idle
    is_training_running: bool = False
    message: str = "No training job has run yet."
    error: Optional[str] = None
    details: dict[str, Any] = Field(default_factory=dict)
    metric_history: MetricHistory = Field(default_factory=MetricHistory)


def new_job_id(now: Optional[datetime] = None) -> str:
    """A sortable, unique job id such as ``job_20261130_142501_1a2b3c4d``."""
    now = now or datetime.now()
    return f"job_{now:%Y%m%d_%H%M%S}_{secrets.token_hex(4)}"
