"""The memory and time estimates of an Orpheus-style run's check (``OrpheusKind.estimates``): its
model is a Llama causal LM, so the text LM's estimates (``preflight.costs.lm_fields``) fed with its
config and the rows' positions as the check counted them (the prompt's text tokens, then seven SNAC
codes a frame: ``data.estimated_lengths``): the longest batch is its longest row ``batch_size``
times (its trained positions: the speech), the time an epoch's positions at this machine's measured
rate. Not counted: the SNAC codec encoding the clips in the worker before training."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def estimates(request: Any, folder: Optional[Path], data: Any, plan: Any) -> dict[str, Any]:
    """The check report's estimate fields of an Orpheus-style run on ``data`` (``ClipSplits``) with
    ``plan``; or ``no_estimates`` saying why not (``costs.lm_fields``)."""
    from trainer_core.preflight.costs import lm_fields

    stats, held = data.stats, data.eval_stats
    rows = min(request.batch_size, stats.rows)
    batch = (rows * stats.longest_tokens, rows * stats.longest_trained)
    eval_tokens = held.total_tokens if held is not None else 0
    return lm_fields(request, folder, batch, stats.total_tokens, eval_tokens, plan, data.eval is not None)
