"""GRPO prompts counted in tokens, as the model sees them before it answers (the chat template
with the generation prompt): for the check's per-row counts (``tokenization.encode_rows``) and the
rows a run keeps (``prompt_fit``)."""

from __future__ import annotations

from typing import Any

from trainer_core.data.preference_tokens import ANSWER_COLUMNS, prompt_ids


def prompt_length(tokenizer: Any, messages: list[dict[str, str]], row: int) -> int:
    """Tokens of ``messages`` rendered as the model sees the prompt (chat template, shaped to fit
    it as training shapes rows, with the generation prompt). Raises DatasetError naming ``row``."""
    return len(prompt_ids(tokenizer, messages, row))


def encode_prompts(
    batch: dict, indices: list[int], tokenizer: Any, max_len: int, completions_only: bool = True
) -> dict:
    """``Dataset.map`` (batched, with indices) function for GRPO rows, in the counting columns of
    ``tokenization.encode_rows`` (for the pre-flight check): ``input_ids`` the prompt (cut to
    ``max_len``), ``labels`` all -100 (a prompt is never scored), ``full_length`` its tokens,
    ``trained`` / ``trainable`` 1 for a prompt that fits (a completion will be sampled and trained
    on) and 0 for one longer than ``max_len`` (left out, as ``fitting_prompts`` leaves it out)."""
    out: dict[str, list] = {"input_ids": [], "labels": [], "full_length": [], "trained": [], "trainable": []}

    for index, messages in zip(indices, batch["prompt"]):
        ids = prompt_ids(tokenizer, messages, index + 1)
        fits = int(len(ids) <= max_len)
        out["input_ids"].append(ids[:max_len])
        out["labels"].append([-100] * min(len(ids), max_len))
        out["full_length"].append(len(ids))
        out["trained"].append(fits)
        out["trainable"].append(fits)
    return out


def is_prompt_rows(columns: list[str]) -> bool:
    """Whether ``columns`` are canonical GRPO rows (a ``prompt``, no answers to score)."""
    return "prompt" in columns and not any(name in columns for name in ANSWER_COLUMNS)
