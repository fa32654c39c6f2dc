"""The closed vocabularies of the request and status models (every module imports them from here):
training types and methods, dataset layouts, job phases and end reasons, the names transformers,
TRL and torch accept for optimizers, schedules, trackers, DPO losses and distributed strategies,
and the whole-number type of every request model's integer fields."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator


def _not_a_boolean(value: Any) -> Any:
    """A JSON ``true`` / ``false`` is not a number (pydantic's lax mode would read it as 1 / 0)."""
    if isinstance(value, bool):
        raise ValueError("a whole number is needed here, not true or false")
    return value


# The integer fields of every request model (the API bodies, the form, YAML and the CLI): a
# boolean is refused, naming the field; 5, 5.0 and "5" are still read as 5.
WholeNumber = Annotated[int, BeforeValidator(_not_a_boolean)]
OptionalWholeNumber = Annotated[Optional[int], BeforeValidator(_not_a_boolean)]


class TrainingType(str, Enum):
    """How the weights are trained: LoRA adapters, LoRA on a 4-bit base (QLoRA), or all weights."""

    lora = "lora"
    qlora = "qlora"
    full = "full"


class TrainingMethod(str, Enum):
    """What the run optimises: ``sft`` learns the answers of conversations or text; ``dpo`` (Rafailov
        et al. 2023), ``orpo`` (Hong et al. 2024) and ``kto`` (Ethayarajh et al. 2024) learn to prefer
        chosen over rejected answers (KTO: desirable over undesirable ones, unpaired); ``grpo`` (Shao et al.
    2024, https://arxiv.org/abs/2402.03300) samples several answers per prompt and learns from the
    rewards they earn (reinforcement learning with verifiable rewards)."""

    sft = "sft"
    dpo = "dpo"
    orpo = "orpo"
    kto = "kto"
    grpo = "grpo"


PREFERENCE_METHODS = (TrainingMethod.dpo, TrainingMethod.orpo, TrainingMethod.kto)
# learning_rate of a preference run that does not set one (LoRA on the default model: see
# docs/BENCHMARKS.md, "Preference training"); SFT's default (1e-3) moves a DPO policy too far.
PREFERENCE_LEARNING_RATE = 5e-5
# learning_rate of a GRPO run that does not set one (LoRA on the default model, docs/BENCHMARKS.md,
# "GRPO": 60 steps at 2e-4 raised the exact-answer reward from 0.59 to 1.0; 1e-3 collapsed); TRL's
# own default (1e-6) is set for full fine-tuning of larger models.
GRPO_LEARNING_RATE = 2e-4
# beta of a GRPO run that does not set one: the KL weight of DeepSeekMath's GRPO (Shao et al. 2024,
# https://arxiv.org/abs/2402.03300); the preference methods' 0.1 is the DPO papers' value.
GRPO_BETA = 0.04
# A method's own default of a field, where it differs from the field's (the request applies it when
# the field is not set; the command preview compares against it; the field's help reads it through
# ``method_defaults_text``)
METHOD_DEFAULTS = {
    ("learning_rate", "dpo"): PREFERENCE_LEARNING_RATE,
    ("learning_rate", "orpo"): PREFERENCE_LEARNING_RATE,
    ("learning_rate", "kto"): PREFERENCE_LEARNING_RATE,
    ("learning_rate", "grpo"): GRPO_LEARNING_RATE,
    ("beta", "grpo"): GRPO_BETA,
}


def short_number(value: float) -> str:
    """A setting's value as help text writes it: ``0.04``, ``5e-5``, ``2e-4``."""
    if value == 0 or abs(value) >= 0.01:
        return f"{value:g}"
    mantissa, exponent = f"{value:.3e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def method_defaults_text(field: str) -> str:
    """``field``'s own defaults per training method, from ``METHOD_DEFAULTS``, as the field's help
    says them: ``a DPO, ORPO or KTO run that does not set it gets 5e-5, a GRPO run 2e-4``."""
    by_value: dict[float, list[str]] = {}
    for method in TrainingMethod:
        if (field, method.value) in METHOD_DEFAULTS:
            by_value.setdefault(METHOD_DEFAULTS[(field, method.value)], []).append(method.value.upper())
    parts = []
    for value, names in by_value.items():
        who = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        parts.append(f"a {who} run{' that does not set it gets' if not parts else ''} {short_number(value)}")
    return ", ".join(parts)


class EmbeddingLoss(str, Enum):
    """The loss an embedding run trains with: sentence-transformers' loss classes, by their names
    (https://sbert.net/docs/sentence_transformer/loss_overview.html). Chosen from the data's shape
    when not set: (anchor, positive[, negative...]) ``MultipleNegativesRankingLoss``, (sentence1,
    sentence2, score) ``CoSENTLoss``, (text, label) ``BatchSemiHardTripletLoss``."""

    MultipleNegativesRankingLoss = "MultipleNegativesRankingLoss"
    CachedMultipleNegativesRankingLoss = "CachedMultipleNegativesRankingLoss"
    CoSENTLoss = "CoSENTLoss"
    CosineSimilarityLoss = "CosineSimilarityLoss"
    BatchSemiHardTripletLoss = "BatchSemiHardTripletLoss"
    BatchAllTripletLoss = "BatchAllTripletLoss"


# The column roles of embedding data, as sentence-transformers' docs name them; ``query`` /
# ``document`` are read as ``anchor`` / ``positive``.
EMBEDDING_ROLES = ("anchor", "positive", "negative", "sentence1", "sentence2", "score", "text", "label")


class FormatType(str, Enum):
    """Dataset layouts we can read; ``auto`` detects one from the columns. ``preference``: chosen /
    rejected pairs (DPO, ORPO, KTO); ``unpaired``: answers with a true/false ``label`` (KTO);
    ``prompt_only``: prompts to sample answers to, with columns for the rewards (GRPO)."""

    auto = "auto"
    alpaca = "alpaca"
    sharegpt = "sharegpt"
    messages = "messages"
    prompt_completion = "prompt_completion"
    text = "text"
    preference = "preference"
    unpaired = "unpaired"
    prompt_only = "prompt_only"


class Phase(str, Enum):
    """Where the one job is in its life (``idle`` when no job has run since the last reset)."""

    idle = "idle"
    loading_model = "loading_model"
    loading_dataset = "loading_dataset"
    configuring = "configuring"
    training = "training"
    completed = "completed"
    error = "error"
    stopped = "stopped"
    interrupted = "interrupted"  # run history only: the app stopped while the run was live


LIVE_PHASES = (Phase.loading_model, Phase.loading_dataset, Phase.configuring, Phase.training)
TERMINAL_PHASES = (Phase.completed, Phase.error, Phase.stopped, Phase.interrupted)
RESUMABLE_PHASES = (Phase.stopped, Phase.interrupted, Phase.error)  # from their last complete checkpoint


class EndReason(str, Enum):
    """Why a job ended (``status.details["end_reason"]``, ``RunRecord.end_reason``); it tells apart
    the two ways to reach ``Phase.stopped``: ``stopped`` (Stop and save: the worker saved a
    checkpoint at the step it stopped at) and ``cancelled`` (Cancel: the worker was ended, nothing
    more was saved, also when cancelled before it started). ``interrupted``: the app stopped while
    the run was live (run history only). ``early_stopped``: eval_loss stopped improving
    (``early_stopping_patience``); the phase is ``completed`` and the final weights are the best
    checkpoint's. A resumed run has none until it ends again."""

    completed = "completed"
    stopped = "stopped"
    cancelled = "cancelled"
    error = "error"
    interrupted = "interrupted"
    early_stopped = "early_stopped"


Optimizer = Literal["adamw_torch", "adamw_torch_fused", "adafactor", "sgd", "paged_adamw_8bit", "adamw_bnb_8bit"]
Scheduler = Literal["linear", "cosine", "constant", "constant_with_warmup", "cosine_with_restarts", "polynomial"]
Tracker = Literal["tensorboard", "trackio", "wandb", "mlflow"]  # transformers' report_to names
DefaultTemplate = Literal["auto", "chatml", "zephyr", "alpaca"]  # models.templates.TEMPLATES, or auto
# TRL's DPOConfig.loss_type values that need nothing beyond beta (TRL 1.16)
DpoLoss = Literal["sigmoid", "hinge", "ipo", "robust", "bco_pair", "sppo_hard", "nca_pair", "apo_zero", "apo_down"]
# How several processes share the work (trainer_core.distributed): DDP copies the model into each;
# FSDP (an accelerate config) and DeepSpeed (a JSON config) shard it across GPUs.
# TRL's GRPO loss aggregations (GRPOConfig.loss_type); "dapo" is TRL's default
GrpoLoss = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"]
# The reward functions a GRPO run can choose in the form (rewards.library); "code": one of the user's
# own functions from reward_file
RewardName = Literal["exact_match", "numeric_match", "format", "length", "json", "repetition", "language", "code"]
# The writing systems the language reward counts letters of: the first word of the letters' Unicode
# names, lower-cased (LATIN SMALL LETTER A: latin); cjk also counts kana (rewards.library)
LanguageScript = Literal[
    "latin", "cyrillic", "greek", "armenian", "georgian", "hebrew", "arabic", "syriac", "thaana",
    "devanagari", "bengali", "gurmukhi", "gujarati", "oriya", "tamil", "telugu", "kannada", "malayalam",
    "sinhala", "thai", "lao", "tibetan", "myanmar", "khmer", "mongolian", "ethiopic", "cherokee",
    "hangul", "hiragana", "katakana", "cjk",
]  # fmt: skip
Distributed = Literal["ddp", "fsdp", "deepspeed"]
# Where the training processes run: this machine (local), or a Ray cluster through Ray Train (ray)
Compute = Literal["local", "ray"]
