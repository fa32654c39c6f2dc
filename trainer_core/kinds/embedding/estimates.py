"""The memory and time estimates of an embedding run's check: the text models of
``preflight.estimates`` (``estimate_memory``, ``estimate_time``) fed with the embedder's
transformer config and its rows' token counts. Every text of a row is a sequence of its own (an
(anchor, positive) row is two); no LM head runs, so no logits are held and none are computed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.embedding.data import EmbeddingData, text_columns
from trainer_core.preflight.stack_costs import report_fields
from trainer_core.preflight.stacks import pretrained_config
from trainer_core.preflight.steps import StepPlan

log = logging.getLogger(__name__)

NOT_HERE = "the model's config is not on this machine"
NOT_COUNTED = "its architecture cannot be counted"


def longest_batch_tokens(request: Any, data: EmbeddingData) -> int:
    """Tokens of the largest batch, taken as ``batch_size`` rows whose texts are all as long as the
    longest one after truncation (an upper bound)."""
    texts = len(text_columns(data.format, data.train.column_names))
    return min(data.stats.longest_tokens, data.stats.max_seq_length) * texts * request.batch_size


def estimates(request: Any, folder: Optional[Path], data: EmbeddingData, plan: StepPlan) -> dict[str, Any]:
    """Fields of the check's ``PreflightReport``: ``memory`` / ``time`` and their totals, and the
    memory warning when the estimate is over the free memory; or ``no_estimates`` saying why not
    (the config is not in ``folder``, or ``preflight.parameters`` cannot count its architecture)."""
    from trainer_core.preflight.costs import evaluations, training_device
    from trainer_core.preflight.estimates import estimate_memory, estimate_time
    from trainer_core.preflight.parameters import UnsupportedModelError

    config = pretrained_config(folder)
    if config is None:
        return {"no_estimates": NOT_HERE}
    device = training_device()
    eval_tokens = data.eval_stats.total_tokens if data.eval_stats is not None else 0
    try:
        memory = estimate_memory(request, config, longest_batch_tokens(request, data), device, lm_head=False)
        time_ = estimate_time(
            request,
            config,
            data.stats.total_tokens,
            plan.total_steps,
            eval_tokens,
            evaluations(plan, request, data.eval is not None),
            device,
            None,  # the run history's speeds are of text runs: the machine's measured rate instead
            steps_per_epoch=plan.steps_per_epoch,
            lm_head=False,
        )
    except UnsupportedModelError as exc:
        log.info("no estimates for %s: %s", folder, exc)
        return {"no_estimates": NOT_COUNTED}
    return report_fields(memory, time_)
