"""The pre-flight check's warnings and errors: each an ``Issue`` saying what is wrong and the fix,
naming request fields by their request names.

Thresholds:
- ``TRUNCATED_SHARE`` 5 % of rows truncated (the issue's figure): above it a noticeable part of the
  answers is never seen whole; the fix offers the ``max_seq_length`` that covers 95 % of rows.
- ``EVAL_MIN_ROWS`` 50 evaluation rows: eval loss is a mean over rows, so its chance movement
  between evaluations is about the per-row spread / sqrt(rows); below 50 rows that is more than
  14 % of the spread, enough for early stopping or the best checkpoint to follow noise.
- ``LEARNING_RATES``, the usual peak learning rates per method (``PREFERENCE_LEARNING_RATES`` for
  DPO / ORPO / KTO, see there), and "far" = more than a factor
  ``LR_FAR`` (3) outside them. LoRA / QLoRA: 5e-5 .. 1e-3 (LoRA paper, Hu et al. 2021, Tables 9-11:
  2e-4 .. 5e-4 on GPT-2 and RoBERTa; QLoRA paper, Dettmers et al. 2023, Table 9: 1e-4 .. 2e-4;
  PEFT / Unsloth recipes: 2e-4; small models are tuned up to 1e-3, e.g. this project's identity
  measurement in issue 12). Full fine-tuning: 5e-6 .. 5e-5 (Alpaca, Taori et al. 2023: 2e-5;
  Llama 2 SFT, Touvron et al. 2023: 2e-5; TRL ``SFTConfig``'s default: 2e-5).
  ``PREFERENCE_LEARNING_RATES`` (DPO / ORPO / KTO): LoRA 1e-6 .. 1e-4 (alignment-handbook's Zephyr
  DPO QLoRA recipe and TRL's DPO LoRA example: 5e-6; this project's default model learns at 5e-5,
  docs/BENCHMARKS.md), full 1e-7 .. 5e-6 (Zephyr DPO, Tunstall et al. 2023: 5e-7; TRL
  ``DPOConfig``'s default: 1e-6).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from trainer_core.data.errors import DatasetError
from trainer_core.preflight.report import Issue
from trainer_core.preflight.tokens import RowCounts
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingMethod, TrainingType

TRUNCATED_SHARE = 0.05
COVERED_SHARE = 0.95
EVAL_MIN_ROWS = 50
LR_FAR = 3.0
LEARNING_RATES = {TrainingType.lora: (5e-5, 1e-3), TrainingType.qlora: (5e-5, 1e-3), TrainingType.full: (5e-6, 5e-5)}
PREFERENCE_LEARNING_RATES = {
    TrainingType.lora: (1e-6, 1e-4),
    TrainingType.qlora: (1e-6, 1e-4),
    TrainingType.full: (1e-7, 5e-6),
}
MAX_SEQ_LENGTH_LIMIT = 32768  # TrainingStartRequest.max_seq_length's bound


def data_error(error: DatasetError) -> Issue:
    """A file or row that cannot be used: the data layer's ``error`` (its message names file, row
    and fix; its ``fields`` join the data's own)."""
    named = list(dict.fromkeys(["local_datasets", "format_type", *error.fields]))
    return Issue(level="error", code="data_error", message=str(error), fields=named)


def no_trained_tokens(counts: RowCounts, where: Callable[[int], str], request: TrainingStartRequest) -> Optional[Issue]:
    """The error when no training row keeps a trained token; ``where(i)`` names row i
    (e.g. "row 3 of a.json"). The cause: rows without any trained token (no assistant text) and/or
    rows whose answer lies beyond ``max_seq_length``."""
    if len(counts.trained) == 0 or counts.kept.any():
        return None
    unlabelled, cut = np.flatnonzero(counts.trainable == 0), np.flatnonzero(counts.trainable > 0)
    causes, fixes, fields = [], [], []
    if len(unlabelled):
        causes.append(
            f"{len(unlabelled)} row(s) have no token to train on (the first is {where(int(unlabelled[0]))})"
            + ("; with train_on_completions only assistant turns are trained" if request.train_on_completions else "")
        )
        fixes.append(
            "add assistant turns" + (" or set train_on_completions=False" if request.train_on_completions else "")
        )
        fields.append("train_on_completions")
    if len(cut):
        need = int(min(counts.full[cut]))
        causes.append(
            f"{len(cut)} row(s) have their answer after max_seq_length={request.max_seq_length} tokens "
            f"(the prompt fills it; the first is {where(int(cut[0]))})"
        )
        fixes.append(f"raise max_seq_length (the shortest such row has {need} tokens)")
        fields.append("max_seq_length")
    return Issue(
        level="error",
        code="no_trained_tokens",
        message=f"training would learn nothing: no training row has a trained token: {'; and '.join(causes)}: "
        f"{' or '.join(fixes)}",
        fields=fields,
    )


def covering_length(full: np.ndarray, share: float = COVERED_SHARE) -> int:
    """The smallest multiple of 64 tokens that holds ``share`` of the rows whole (``full``: lengths
    before truncation, (rows,)), capped at the request's bound."""
    needed = int(np.quantile(full, share, method="higher"))
    return min(MAX_SEQ_LENGTH_LIMIT, max(64, math.ceil(needed / 64) * 64))


def truncation(counts: RowCounts) -> Optional[Issue]:
    """Warning when more than TRUNCATED_SHARE of the training rows are cut at max_seq_length."""
    rows = len(counts.full)
    truncated = int((counts.full > counts.max_seq_length).sum())
    if not rows or truncated / rows <= TRUNCATED_SHARE:
        return None
    suggest = covering_length(counts.full)
    cut = int(np.maximum(counts.full - counts.max_seq_length, 0).sum())
    return Issue(
        level="warning",
        code="rows_truncated",
        fields=["max_seq_length"],
        message=f"{truncated} of {rows} training rows ({truncated / rows:.0%}) are longer than max_seq_length="
        f"{counts.max_seq_length} tokens and are cut ({cut} tokens lost, answers included): set "
        f"max_seq_length to {suggest} to keep {COVERED_SHARE:.0%} of rows whole (longer rows cost "
        "memory and time), or shorten the rows",
    )


def eval_too_small(eval_rows: int, request: TrainingStartRequest, has_eval: bool) -> Optional[Issue]:
    """Warning when there is evaluation data but fewer than EVAL_MIN_ROWS rows of it."""
    if not has_eval or eval_rows >= EVAL_MIN_ROWS:
        return None
    if request.val_size > 0:
        fix, fields = "raise val_size or give local_eval_datasets with more rows", ["val_size"]
    else:
        fix, fields = (
            "give more evaluation rows (local_eval_datasets or eval_split)",
            ["local_eval_datasets", "eval_split"],
        )
    return Issue(
        level="warning",
        code="eval_too_small",
        fields=fields,
        message=f"the evaluation set has {eval_rows} rows, fewer than {EVAL_MIN_ROWS}: its loss moves by chance "
        "between evaluations by about the per-row spread / sqrt(rows), so eval loss, early stopping and "
        f"the best checkpoint would follow noise: {fix}",
    )


def evaluations(request: TrainingStartRequest, total_steps: int, has_eval: bool) -> Optional[Issue]:
    """Warning when evaluation data is given but the run evaluates never (``eval_steps`` above the
    steps) or too rarely for early stopping to act (patience + 1 evaluations are needed: one to set
    the best, ``early_stopping_patience`` without improvement)."""
    if not has_eval or total_steps <= 0:
        return None
    count = total_steps // request.eval_steps
    needed = request.early_stopping_patience + 1 if request.early_stopping_patience else 1
    if count >= needed:
        return None
    every = max(total_steps // (needed + 1), 1)
    what = (
        "early stopping can never act"
        if request.early_stopping_patience and count
        else "the evaluation data is never used"
    )
    return Issue(
        level="warning",
        code="too_few_evaluations",
        fields=["eval_steps", "early_stopping_patience"],
        message=f"eval_steps={request.eval_steps} gives {count} evaluation{'s' if count != 1 else ''} in "
        f"{total_steps} steps, so {what}: set eval_steps to {every} or less"
        + (
            f" (early_stopping_patience={request.early_stopping_patience} needs {needed})"
            if request.early_stopping_patience
            else ""
        ),
    )


PLACEHOLDER_ROWS = 5000  # rows per source searched for template placeholders


def placeholders(sources: Sequence[Any]) -> Optional[Issue]:
    """Warning when training rows still hold template placeholders such as ``{{name}}`` (as
    LLaMA-Factory's identity file ships): the model would learn the braces literally. Names each
    source that holds them with the placeholders and row counts (the first PLACEHOLDER_ROWS rows of
    each source are searched); the Train page fills them in (``ui.placeholder_panel``)."""
    from trainer_core.data.placeholders import find_placeholders

    found = []
    for source in sources:
        if source.split != "train":
            continue
        rows = source.rows.select(range(min(len(source.rows), PLACEHOLDER_ROWS)))
        counts = find_placeholders(rows.to_list())
        if counts:
            found.append(f"{source.name} (" + ", ".join(f"{{{{{c.name}}}}} in {c.rows} rows" for c in counts) + ")")
    if not found:
        return None
    return Issue(
        level="warning",
        code="template_placeholders",
        fields=["local_datasets"],
        message=f"template placeholders are still in the data: {'; '.join(found)}. The model would learn "
        "the braces literally: replace them with the real values first (on the Train page: type them "
        "under the dataset preview and press Fill in, which trains a filled copy and leaves the file as it is)",
    )


def learning_rate(request: TrainingStartRequest) -> Optional[Issue]:
    """Warning when ``learning_rate`` is more than LR_FAR outside the usual range of its method."""
    preference = request.training_method != TrainingMethod.sft
    low, high = (PREFERENCE_LEARNING_RATES if preference else LEARNING_RATES)[request.training_type]
    rate, method = request.learning_rate, request.training_type.value
    if low / LR_FAR <= rate <= high * LR_FAR:
        return None
    effect = (
        "the weights will hardly move" if rate < low else "training is likely to diverge or forget what the model knew"
    )
    what = f"training_type={method}" + (f" with training_method={request.training_method.value}" if preference else "")
    return Issue(
        level="warning",
        code="learning_rate_unusual",
        fields=["learning_rate", "training_type", *(["training_method"] if preference else [])],
        message=f"learning_rate={rate:g} is far {'below' if rate < low else 'above'} the usual range for "
        f"{what} ({low:g} to {high:g}): {effect}; set learning_rate within that range",
    )


def memory_over_free(total_gib: Optional[float], free_gib: Optional[float], device: str) -> Optional[Issue]:
    """Warning when the estimated peak memory exceeds the device's free memory now."""
    if total_gib is None or free_gib is None or total_gib <= free_gib:
        return None
    return Issue(
        level="warning",
        code="memory_over_free",
        fields=["batch_size", "max_seq_length", "gradient_checkpointing", "training_type"],
        message=f"the run is estimated to need {total_gib:.1f} GiB of {device} memory but {free_gib:.1f} GiB is "
        "free: lower batch_size (raise gradient_accumulation_steps to keep the step size) or "
        "max_seq_length, turn on gradient_checkpointing, or use training_type=lora / qlora",
    )


def trackers_missing(request: TrainingStartRequest) -> Optional[Issue]:
    """Error when a tracker in ``report_to`` has no package on this server (found with
    ``importlib.util.find_spec``, nothing imported), naming the pip command for each."""
    from trainer_core.training.trackers import install_hint, missing_trackers

    missing = missing_trackers(request.report_to)
    if not missing:
        return None
    what = f"{missing[0]} is" if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]} are"
    installs = " and ".join(f"`{install_hint(name)}`" for name in missing)
    pronoun = "it" if len(missing) == 1 else "them"
    return Issue(
        level="error",
        code="tracker_not_installed",
        fields=["report_to"],
        message=f"report_to: {what} not installed on this server; install {pronoun} with {installs}, "
        f"or remove {pronoun} from report_to",
    )


def tokenizer_missing(model_name: str) -> Issue:
    """Warning when the model's tokenizer is not on this machine (token counts unknown)."""
    return Issue(
        level="warning",
        code="tokenizer_not_local",
        fields=["model_name"],
        message=f"the tokenizer of model_name={model_name!r} is not on this machine, so tokens, truncation, "
        "trained tokens and estimates are not checked (the run checks them after downloading it): "
        "download the model first or pick one that is already here",
    )


__all__ = [
    "EVAL_MIN_ROWS",
    "LEARNING_RATES",
    "TRUNCATED_SHARE",
    "covering_length",
    "data_error",
    "eval_too_small",
    "learning_rate",
    "memory_over_free",
    "no_trained_tokens",
    "tokenizer_missing",
    "trackers_missing",
    "truncation",
]


def rewards_unusable(request: TrainingStartRequest, columns: list[str]) -> Optional[Issue]:
    """GRPO: the error when the run has no reward or a reward reads a column the prompt rows
    (``columns``) lack (``rewards.build.chosen_rewards``); None otherwise and for other methods."""
    if request.training_method != TrainingMethod.grpo:
        return None
    from trainer_core.rewards.build import RewardError, chosen_rewards

    try:
        chosen_rewards(request, [c for c in columns if not c.startswith("_")], code_names=["code"])
    except RewardError as exc:
        return Issue(
            level="error", code="rewards_unusable", message=str(exc), fields=["rewards", "custom_format_mapping"]
        )
    return None


def embedding_fields_unused(request: TrainingStartRequest) -> Optional[Issue]:
    """Error when a run that trains a text generator (its model is no embedding model and
    ``is_embedding`` is empty) is given embedding settings (``request.rules.EMBEDDING_FIELDS``)."""
    from trainer_core.request.rules import EMBEDDING_FIELDS

    given = [name for name in EMBEDDING_FIELDS if getattr(request, name) is not None]
    if not given:
        return None
    return Issue(
        level="error",
        code="embedding_fields_without_embedding",
        message=f"{', '.join(given)}: embedding settings, but {request.model_name} is a text generator: turn "
        "is_embedding on to train it as an embedder, pick an embedding model, or clear them",
        fields=[*given, "is_embedding"],
    )
