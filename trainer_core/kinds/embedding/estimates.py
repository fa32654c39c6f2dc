"""The memory and time estimates of an embedding run's check: the text models of
``preflight.estimates`` (``estimate_memory``, ``estimate_time``) fed with the embedder's
transformer config and its rows' token counts. Every text of a row is a sequence of its own (an
(anchor, positive) row is two); no LM head runs, so no logits are held and none are computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.embedding.data import EmbeddingData, text_columns
from trainer_core.preflight.stacks import NOT_HERE
from trainer_core.preflight.steps import StepPlan

__all__ = ["NOT_HERE", "estimates", "longest_batch_tokens"]


def longest_batch_tokens(request: Any, data: EmbeddingData) -> int:
    """Tokens of the largest batch, taken as ``batch_size`` rows whose texts are all as long as the
    longest one after truncation (an upper bound)."""
    texts = len(text_columns(data.format, data.train.column_names))
    return min(data.stats.longest_tokens, data.stats.max_seq_length) * texts * request.batch_size


def estimates(request: Any, folder: Optional[Path], data: EmbeddingData, plan: StepPlan) -> dict[str, Any]:
    """Fields of the check's ``PreflightReport``: ``memory`` / ``time`` and their totals, and the
    memory warning when the estimate is over the free memory; or ``no_estimates`` saying why not
    (``costs.lm_fields``). No LM head runs: an embedder pools its hidden states."""
    from trainer_core.preflight.costs import lm_fields

    eval_tokens = data.eval_stats.total_tokens if data.eval_stats is not None else 0
    batch = (longest_batch_tokens(request, data), None)
    return lm_fields(request, folder, batch, data.stats.total_tokens, eval_tokens, plan, data.eval is not None, False)
