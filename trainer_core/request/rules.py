"""The training request's cross-field rules, one function each, run in ``RULES``' order after every
field is valid (``apply_rules``: the request's one model validator). A rule raises ValueError whose
message names the fields and the fix (the first broken rule is the refusal), or completes a setting
that follows from others (``use_lora``, ``qlora``, a method's defaults, a Ray run's processes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

from trainer_core.refusals import Refusal
from trainer_core.request.device_rules import DEVICE_RULES
from trainer_core.vocabulary import METHOD_DEFAULTS, EmbeddingLoss, TrainingMethod, TrainingType

# A TrainingStartRequest (trainer_core.schemas composes it from the field groups, above this module)
Request = Any

NO_TRAINING_DATA = "no training data"  # how every door's refusal of a request without data begins


def training_data_missing(local_datasets: Optional[Sequence[str]], hf_dataset: Any, fix: str) -> Optional[str]:
    """The one rule of every door (the schema, the form, the CLI): a run needs training files or a Hub
    dataset id (a blank id is none). Returns the refusal, ``no training data: <fix>`` (``fix`` in the
    door's words), or None when there is data."""
    if local_datasets or str(hf_dataset or "").strip():
        return None
    return f"{NO_TRAINING_DATA}: {fix}"


def use_lora_agrees(request: Request) -> None:
    """The seed API's ``use_lora`` alone chooses the training type (false: full); given with
    ``training_type`` the two must agree."""
    if request.use_lora is None:
        return
    if "training_type" not in request.model_fields_set:
        request.training_type = TrainingType.lora if request.use_lora else TrainingType.full
    elif request.use_lora != (request.training_type != TrainingType.full):
        raise Refusal(
            f"use_lora ({str(request.use_lora).lower()}) disagrees with training_type "
            f"({request.training_type.value}): drop use_lora, or choose training_type "
            f"{'lora or qlora' if request.use_lora else 'full'}",
            fields=("use_lora", "training_type"),
        )


def some_training(request: Request) -> None:
    """A run trains for some epochs or some steps."""
    if request.num_epochs == 0 and request.max_steps == 0:
        raise Refusal(
            "num_epochs and max_steps are both 0: set num_epochs > 0 or max_steps > 0",
            fields=("num_epochs", "max_steps"),
        )


def four_bit_is_qlora(request: Request) -> None:
    """QLoRA loads the base in 4-bit (turned on); 4-bit loading is QLoRA's alone."""
    if request.training_type == TrainingType.qlora:
        request.load_in_4bit = True
    elif request.load_in_4bit:
        raise Refusal(
            "load_in_4bit is only used with training_type='qlora': choose qlora or turn load_in_4bit off",
            fields=("load_in_4bit", "training_type"),
        )


def slice_in_order(request: Request) -> None:
    """A row slice ends after it starts (an end of 0: to the end of the data)."""
    if 0 < request.dataset_slice_end <= request.dataset_slice_start:
        raise Refusal(
            f"dataset_slice_end ({request.dataset_slice_end}) must be after dataset_slice_start "
            f"({request.dataset_slice_start})",
            fields=("dataset_slice_end", "dataset_slice_start"),
        )


def one_evaluation_source(request: Request) -> None:
    """Evaluation data comes from one place: ``val_size`` of the training rows, or evaluation files /
    a Hub ``eval_split``."""
    if request.val_size > 0 and (request.local_eval_datasets or request.eval_split):
        given = "local_eval_datasets" if request.local_eval_datasets else "eval_split"
        raise Refusal(
            f"val_size ({request.val_size}) and {given} both name evaluation data: split the training rows "
            f"with val_size, or give {given}, not both (set val_size to 0 to use {given})",
            fields=("val_size", given),
        )


def hub_parts_need_hub(request: Request) -> None:
    """subset, train_split and eval_split pick parts of the Hub dataset: refused without hf_dataset
    (local files are read whole; train_split may stay "train"), and eval_split beside
    local_eval_datasets (the files would win)."""
    if request.hf_dataset:
        if request.eval_split and request.local_eval_datasets:
            raise Refusal(
                f"eval_split ({request.eval_split[:40]!r}) and local_eval_datasets both name evaluation data: "
                "give the Hub split or the files, not both",
                fields=("eval_split", "local_eval_datasets"),
            )
        return
    fixes = {
        "subset": "clear subset",
        "train_split": "leave train_split at 'train'",
        "eval_split": "clear eval_split and give evaluation files in local_eval_datasets (or a val_size)",
    }
    for name, fix in fixes.items():
        value = getattr(request, name)
        if value and not (name == "train_split" and value == "train"):
            raise Refusal(
                f"{name} ({value[:40]!r}) picks a part of a Hub dataset (hf_dataset); local files are read "
                f"whole: {fix}, or give hf_dataset",
                fields=(name, "hf_dataset", *(("local_eval_datasets", "val_size") if name == "eval_split" else ())),
            )


def one_warmup(request: Request) -> None:
    """Warm-up is given in steps or as a ratio, not both."""
    if request.warmup_steps > 0 and request.warmup_ratio > 0:
        raise Refusal("set either warmup_steps or warmup_ratio, not both", fields=("warmup_steps", "warmup_ratio"))


def early_stopping_needs_evaluation(request: Request) -> None:
    """Early stopping watches eval_loss, so it needs evaluation data."""
    has_eval = request.val_size > 0 or request.local_eval_datasets or (request.hf_dataset and request.eval_split)
    if request.early_stopping_patience > 0 and not has_eval:
        raise Refusal(
            f"early_stopping_patience ({request.early_stopping_patience}) needs evaluation data: set val_size "
            "(e.g. 0.1) or give local_eval_datasets (or a Hub eval_split), or set early_stopping_patience to 0",
            fields=("early_stopping_patience", "val_size", "local_eval_datasets", "eval_split"),
        )


def has_training_data(request: Request) -> None:
    """A run needs training data (``training_data_missing``, the rule every door applies)."""
    problem = training_data_missing(
        request.local_datasets, request.hf_dataset, "give local_datasets (files) or hf_dataset (a hub id)"
    )
    if problem:
        raise Refusal(problem, fields=("local_datasets", "hf_dataset"), code="no_training_data")


def method_defaults(request: Request) -> None:
    """A field the request does not set takes its method's own default (``METHOD_DEFAULTS``: a
    preference or GRPO run's learning rate, GRPO's beta)."""
    for (name, method), value in METHOD_DEFAULTS.items():
        if method == request.training_method.value and name not in request.model_fields_set:
            setattr(request, name, value)


def rewards_are_grpo(request: Request) -> None:
    """Rewards and a reward file are read by GRPO alone."""
    if request.training_method != TrainingMethod.grpo and (request.rewards or request.reward_file):
        raise Refusal(
            f"rewards and reward_file are read by training_method grpo, not {request.training_method.value}: "
            "choose grpo, or clear them",
            fields=("rewards", "reward_file", "training_method"),
        )


def beta_above_zero(request: Request) -> None:
    """Only GRPO takes beta 0 (no reference model); the preference methods' beta is above 0."""
    if request.training_method != TrainingMethod.grpo and request.beta == 0:
        raise Refusal(
            f"beta must be above 0 for training_method {request.training_method.value}",
            fields=("beta", "training_method"),
        )


def grpo_unpacked(request: Request) -> None:
    """GRPO samples answers to prompts: no packing."""
    if request.training_method == TrainingMethod.grpo and request.packing:
        raise Refusal(
            "packing joins rows for SFT; GRPO samples answers to prompts: turn packing off", fields=("packing",)
        )


def grpo_groups_fill_batch(request: Request) -> None:
    """A GRPO step trains whole groups of answers: batch_size x gradient_accumulation_steps is a
    multiple of num_generations."""
    per_step = request.batch_size * request.gradient_accumulation_steps
    if request.training_method == TrainingMethod.grpo and per_step % request.num_generations:
        raise Refusal(
            f"batch_size x gradient_accumulation_steps ({per_step}) must be a multiple of num_generations "
            f"({request.num_generations}): each step trains whole groups of answers to a prompt; e.g. set "
            f"batch_size to {request.num_generations}",
            fields=("batch_size", "gradient_accumulation_steps", "num_generations"),
        )


def packing_is_sft(request: Request) -> None:
    """Packing joins rows, which only SFT may do (preference methods compare whole answers)."""
    if request.training_method != TrainingMethod.sft and request.packing:
        raise Refusal(
            f"packing joins rows for SFT; training_method {request.training_method.value!r} compares whole "
            "answers: turn packing off",
            fields=("packing", "training_method"),
        )


def adapter_needs_lora(request: Request) -> None:
    """A run that continues an adapter trains LoRA (or QLoRA)."""
    if request.adapter_name_or_path and request.training_type == TrainingType.full:
        raise Refusal(
            "adapter_name_or_path continues a LoRA adapter: choose training_type lora or qlora "
            "(or merge the adapter into a model and give that model for full training)",
            fields=("adapter_name_or_path", "training_type"),
        )


def modules_to_save_with_lora(request: Request) -> None:
    """modules_to_save trains modules in full beside LoRA: nothing to pick in full training."""
    if request.modules_to_save and request.training_type == TrainingType.full:
        raise Refusal(
            "modules_to_save picks modules to train in full beside LoRA; with training_type full every weight "
            "trains: clear modules_to_save",
            fields=("modules_to_save", "training_type"),
        )


def embedding_rate_needs_embeddings(request: Request) -> None:
    """embedding_learning_rate needs embeddings that train: in modules_to_save, or full training."""
    if (
        request.embedding_learning_rate is not None
        and request.training_type != TrainingType.full
        and not request.modules_to_save
    ):
        raise Refusal(
            "embedding_learning_rate applies to embeddings that train: list them in modules_to_save "
            "(e.g. embed_tokens, lm_head), choose training_type full, or clear embedding_learning_rate",
            fields=("embedding_learning_rate", "modules_to_save", "training_type"),
        )


def loftq_is_qlora(request: Request) -> None:
    """LoftQ initialises adapters against a 4-bit base: QLoRA only."""
    if request.use_loftq and request.training_type != TrainingType.qlora:
        raise Refusal(
            "use_loftq initialises adapters against a 4-bit base: choose training_type qlora or turn use_loftq off",
            fields=("use_loftq", "training_type"),
        )


def target_names_not_empty(request: Request) -> None:
    """Every name in target_modules is a name."""
    if request.lora_r > 0 and any(not m.strip() for m in request.target_modules):
        raise Refusal("target_modules contains an empty name", fields=("target_modules",))


# The order matters twice: the first broken rule is the refusal, and a rule may read what an earlier
# one completed (use_lora's training type, a method's beta).
EMBEDDING_FIELDS = ("embedding_loss", "embedding_columns", "matryoshka_dims", "query_prompt", "mini_batch_size")


def embedding_fields_need_embedding(request: Request) -> None:
    """The embedding settings are read by an embedding run alone: refused with ``is_embedding``
    off (empty: the model's folder decides, checked at Start: ``kinds.embedding.check``)."""
    given = [name for name in EMBEDDING_FIELDS if getattr(request, name) is not None]
    if request.is_embedding is False and given:
        raise Refusal(
            f"{', '.join(given)}: embedding settings, but is_embedding is off: turn is_embedding on (or leave it "
            "empty for an embedding model), or clear them",
            fields=(*given, "is_embedding"),
            code="embedding_fields_without_embedding",
        )


def embedding_is_sft(request: Request) -> None:
    """An embedding run learns from pairs with its own losses: no preference or GRPO method."""
    if request.is_embedding and request.training_method != TrainingMethod.sft:
        raise Refusal(
            f"training_method {request.training_method.value} trains a text generator, not an embedding model: "
            "leave training_method sft for an embedding run (its loss is embedding_loss), or turn is_embedding off",
            fields=("training_method", "is_embedding"),
            code="embedding_method",
        )


def mini_batch_size_is_cached(request: Request) -> None:
    """``mini_batch_size`` is read by CachedMultipleNegativesRankingLoss alone."""
    loss = request.embedding_loss
    if (
        request.mini_batch_size is not None
        and loss is not None
        and loss != EmbeddingLoss.CachedMultipleNegativesRankingLoss
    ):
        raise Refusal(
            f"mini_batch_size is read by embedding_loss {EmbeddingLoss.CachedMultipleNegativesRankingLoss.value}, not {loss.value}: choose that loss, "
            "or clear mini_batch_size",
            fields=("mini_batch_size", "embedding_loss"),
            code="mini_batch_size_without_cached_loss",
        )


RULES: tuple[Callable[[Request], None], ...] = (
    use_lora_agrees,
    some_training,
    four_bit_is_qlora,
    slice_in_order,
    one_evaluation_source,
    hub_parts_need_hub,
    one_warmup,
    early_stopping_needs_evaluation,
    has_training_data,
    method_defaults,
    rewards_are_grpo,
    beta_above_zero,
    grpo_unpacked,
    grpo_groups_fill_batch,
    packing_is_sft,
    adapter_needs_lora,
    *DEVICE_RULES,
    modules_to_save_with_lora,
    embedding_rate_needs_embeddings,
    loftq_is_qlora,
    target_names_not_empty,
    embedding_fields_need_embedding,
    embedding_is_sft,
    mini_batch_size_is_cached,
)


def apply_rules(request: Request) -> None:
    """Every rule of ``RULES`` in order on a request whose fields are each valid. Raises the first
    broken rule's ValueError."""
    for rule in RULES:
        rule(request)
