"""The GRPO prompts a run keeps: those that fit ``max_seq_length``, with their token counts."""

from __future__ import annotations

from typing import Any

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.data.prompt_tokens import prompt_length
from trainer_core.data.tokenization import TokenizationStats


def fitting_prompts(rows: datasets.Dataset, tokenizer: Any, max_len: int) -> tuple[datasets.Dataset, Any]:
    """GRPO rows whose prompt, rendered through ``tokenizer``'s chat template with the generation
    prompt, has at most ``max_len`` tokens (``max_seq_length``; longer ones are left out and counted
    as ``dropped_rows``), with their counts (``TokenizationStats``: ``total_tokens`` are prompt
    tokens; nothing is trained on before sampling, so ``trained_tokens`` is 0). Raises DatasetError
    when no row is left."""
    lengths = [prompt_length(tokenizer, messages, i + 1) for i, messages in enumerate(rows["prompt"])]
    keep = [i for i, n in enumerate(lengths) if n <= max_len]
    if not keep:
        raise DatasetError(
            f"every prompt is longer than max_seq_length ({max_len} tokens; the shortest has {min(lengths)}): "
            "raise max_seq_length",
            fields=("max_seq_length",),
        )
    kept = rows if len(keep) == len(rows) else rows.select(keep)
    stats = TokenizationStats(
        rows=len(keep),
        total_tokens=sum(lengths[i] for i in keep),
        trained_tokens=0,
        truncated_rows=0,
        truncated_tokens=0,
        max_seq_length=max_len,
        dropped_rows=len(rows) - len(keep),
    )
    return kept, stats
