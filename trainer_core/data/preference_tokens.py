"""Preference rows tokenized as TRL's preference trainers tokenize them, with the counts the worker
and the pre-flight check report.

TRL (``DPOTrainer._tokenize``, TRL 1.16) renders ``prompt`` with the generation prompt and
``prompt + answer`` without, through the model's chat template; the answer is what follows their
common token prefix. Batches cut prompt + answer to ``max_length`` from the end (``keep_start``), and
rows whose prompt alone fills ``max_length`` are dropped. Only answer tokens are scored.

One output row per input row, in ``tokenization.encode_rows``' columns, so the check's counts,
histogram and samples work unchanged: ``input_ids`` / ``labels`` = prompt + first answer (chosen,
or the KTO completion) cut to ``max_length``, labels -100 on the prompt; ``full_length`` = prompt +
the longer answer (tokens before the cut); ``trained`` / ``trainable`` = answer tokens of the
longer answer kept / before the cut (0 trained: the row is dropped). A pair is counted as its
longest sequence, so ``trained`` <= the tokens kept, as for SFT rows.
"""

from __future__ import annotations

from typing import Any, Optional

from trainer_core.data.errors import DatasetError
from trainer_core.data.tool_rows import conversation

IGNORE = -100
ANSWER_COLUMNS = ("chosen", "rejected", "completion")
PREFERENCE_COLUMNS = ("prompt", *ANSWER_COLUMNS, "label")


def is_preference_rows(columns: list[str]) -> bool:
    """Whether ``columns`` are canonical preference rows (``data.preference``)."""
    return "prompt" in columns and any(name in columns for name in ANSWER_COLUMNS)


def _ids(
    tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool, row: int, tools: Optional[str] = None
) -> list[int]:
    from jinja2 import TemplateError

    try:  # the row's tools as the template takes them, then shaped (Gemma: no system; Mistral: alternation)
        messages, extra = conversation(tokenizer, messages, tools)
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt, **extra)
    except (TemplateError, ValueError, TypeError) as exc:
        raise DatasetError(
            f"row {row}: the chat template of {tokenizer.name_or_path} cannot render this conversation: {exc}"
        ) from exc
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]], row: int, tools: Optional[str] = None) -> list[int]:
    """The token ids of prompt ``messages`` as the model sees them before it answers (chat template,
    with ``tools``, the canonical column's text, as ``tool_rows.conversation`` gives them, shaped to
    fit it, with the generation prompt). Raises DatasetError naming ``row``."""
    return _ids(tokenizer, messages, True, row, tools)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def encode_preference(
    batch: dict, indices: list[int], tokenizer: Any, max_len: int, completions_only: bool = True
) -> dict:
    """``Dataset.map`` (batched, with indices) function for canonical preference rows; see the
    module docstring for the columns. ``completions_only`` is ignored: preference losses score the
    answers only. Raises DatasetError naming the row when the chat template fails on it."""
    sides = [name for name in ANSWER_COLUMNS if name in batch]
    out: dict[str, list] = {"input_ids": [], "labels": [], "full_length": [], "trained": [], "trainable": []}
    for offset, index in enumerate(indices):
        prompt = batch["prompt"][offset]
        prompt_ids = _ids(tokenizer, prompt, True, index + 1)
        fulls = [_ids(tokenizer, prompt + batch[side][offset], False, index + 1) for side in sides]
        prompt_len = min(_common_prefix(prompt_ids, full) for full in fulls)
        answers = [full[prompt_len:] for full in fulls]
        room = max(max_len - prompt_len, 0)
        first = fulls[0][:prompt_len] + answers[0]
        out["input_ids"].append(first[:max_len])
        out["labels"].append(([IGNORE] * prompt_len + answers[0])[:max_len])
        out["full_length"].append(prompt_len + max(len(answer) for answer in answers))
        out["trained"].append(max(min(len(answer), room) for answer in answers))
        out["trainable"].append(max(len(answer) for answer in answers))
    return out
