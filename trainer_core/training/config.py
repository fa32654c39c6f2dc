"""The one mapping from a ``TrainingStartRequest`` to TRL's configs (``SFTConfig`` here; the
preference configs in ``preference.py`` share ``training_args``) and PEFT's ``LoraConfig``.

The seed API's names are translated here and nowhere else:
``batch_size`` -> ``per_device_train_batch_size``, ``num_epochs`` -> ``num_train_epochs``,
``max_seq_length`` -> ``max_length``, ``random_seed`` -> ``seed``, ``warmup_ratio`` -> fractional
``warmup_steps`` (transformers 5 folded the ratio into ``warmup_steps`` < 1). ``report_to`` keeps its
name and values (transformers' tracker names); where the trackers write is set up by ``trackers.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingType

log = logging.getLogger(__name__)


def training_args(
    request: TrainingStartRequest, output_dir: Path, device: str, has_eval: bool, run_name: Optional[str] = None
) -> dict[str, Any]:
    """The ``transformers.TrainingArguments`` every method shares, as keyword arguments: logs every
    step (NaN / inf losses unfiltered), saves at ``save_steps`` (and at a stop), evaluates every
    ``eval_steps`` when ``has_eval``. bf16 mixed precision where ``models.precision`` chooses it; activation
    checkpointing only when asked (TRL's configs turn both on by default). Reports to
    ``request.report_to``'s trackers under ``run_name`` (the job id; see ``tracker_args``)."""
    import torch

    from trainer_core.models.loading import compute_dtype

    return dict(
        output_dir=str(output_dir),
        num_train_epochs=request.num_epochs,
        max_steps=request.max_steps if request.max_steps > 0 else -1,
        learning_rate=request.learning_rate,
        per_device_train_batch_size=request.batch_size,
        per_device_eval_batch_size=request.batch_size,
        gradient_accumulation_steps=request.gradient_accumulation_steps,
        warmup_steps=request.warmup_steps if request.warmup_steps > 0 else request.warmup_ratio,
        weight_decay=request.weight_decay,
        max_grad_norm=request.max_grad_norm,
        lr_scheduler_type=request.lr_scheduler_type,
        optim=optimizer_for(request.optim, device),
        seed=request.random_seed,
        data_seed=request.random_seed,
        activation_checkpointing=request.gradient_checkpointing,  # transformers 5 name; TRL defaults the old one to True
        bf16=compute_dtype(device, request) == torch.bfloat16,  # autocast; trained weights stay fp32
        fp16=False,
        use_cpu=device == "cpu",
        logging_steps=1,
        logging_first_step=True,
        # Log a NaN / inf loss as it is (transformers' filter reports the running mean instead, which
        # hid a diverged run behind finite numbers); DivergenceGuard (trainer.py) acts on it.
        logging_nan_inf_filter=False,
        eval_strategy="steps" if has_eval else "no",
        eval_steps=request.eval_steps if has_eval else None,
        **save_args(request, has_eval),
        **tracker_args(request, run_name),
        disable_tqdm=True,
        **distributed_args(request),
    )


def distributed_args(request: TrainingStartRequest) -> dict[str, Any]:
    """Settings for a run in several processes (``trainer_core.distributed``): no search for unused
    parameters (every trained weight gets a gradient in our runs; the search costs a pass over the
    graph each step), and the user's DeepSpeed JSON (``distributed`` = deepspeed) as
    ``TrainingArguments.deepspeed``. FSDP comes from the accelerate config through the launcher."""
    from trainer_core.distributed.env import world_size

    if world_size() <= 1:
        return {}
    args: dict[str, Any] = {"ddp_find_unused_parameters": False}
    if request.distributed == "deepspeed" and request.distributed_config:
        args["deepspeed"] = request.distributed_config
    return args


def build_sft_config(
    request: TrainingStartRequest,
    output_dir: Path,
    device: str,
    has_eval: bool,
    run_name: Optional[str] = None,
    rows_apart: bool = True,
    collated: bool = False,
    liger: bool = False,
) -> Any:
    """``trl.SFTConfig`` for ``request``: ``training_args`` plus padding-free batches of rows our data
    layer has already tokenized, masked and cut (``tokenization.py``; packing is left to TRL).
    ``rows_apart`` False (the model lets packed rows attend to each other:
    ``packed_rows.keeps_packed_rows_apart``): padded batches instead, and ``packing`` is refused
    with a ValueError naming the field. ``collated`` (rows the model kind's collator makes into
    batches, ``ModelKind.collator``: rows with images): padded batches of canonical rows, as TRL
    allows for images (it refuses padding-free and packed image batches); ``packing`` refused naming
    the field."""
    import torch
    from trl import SFTConfig

    from trainer_core.distributed.env import world_size

    # One row per batch cannot be split by nn.DataParallel, which Trainer uses when one process sees
    # several GPUs (several processes use DDP instead: one GPU each).
    padding_free = rows_apart and not (device == "cuda" and torch.cuda.device_count() > 1 and world_size() <= 1)
    if request.packing and not rows_apart:
        raise ValueError(
            "packing: this model's attention lets packed rows see each other (its masks ignore the rows' "
            "position_ids), so packed rows would train on contexts that never occur; turn packing off"
        )
    if collated:
        if request.packing:
            raise ValueError("packing: rows with images cannot be packed (TRL refuses it); turn packing off")
        return SFTConfig(
            **training_args(request, output_dir, device, has_eval, run_name),
            padding_free=False,
            max_length=None,  # the collator cuts rows (the kind's prepare_data left out those it could not cut)
            packing=False,
            include_num_input_tokens_seen="non_padding",
            remove_unused_columns=False,  # the collator reads messages and images
            dataset_kwargs={"skip_prepare_dataset": True},
        )
    return SFTConfig(
        **training_args(request, output_dir, device, has_eval, run_name),
        # Padding-free batches (see trainer.py; bench/throughput.py). TRL wants max_length=None without
        # packing: our data layer has already cut every row to max_seq_length (tokenization.py).
        padding_free=padding_free,
        max_length=None if padding_free and not request.packing else request.max_seq_length,
        packing=request.packing,
        # Without padding every token counts; "non_padding" would skip real pad-id tokens (often eos).
        include_num_input_tokens_seen="all" if padding_free else "non_padding",
        use_liger_kernel=liger,
        # Our data layer already tokenized, masked and truncated the rows (see tokenization.py).
        dataset_kwargs={"skip_prepare_dataset": not request.packing},
    )


def save_args(request: TrainingStartRequest, has_eval: bool) -> dict[str, Any]:
    """``SFTConfig`` save settings. Without early stopping: a checkpoint every ``save_steps`` (0:
    none). With it (``early_stopping_patience`` > 0 and evaluation data), as transformers'
    ``EarlyStoppingCallback`` needs: a checkpoint at every evaluation (``save_steps = eval_steps``),
    the best by ``eval_loss`` (lower is better) tracked and loaded at the end
    (``load_best_model_at_end``)."""
    if request.early_stopping_patience > 0 and has_eval:
        return dict(
            save_strategy="steps",
            save_steps=request.eval_steps,
            load_best_model_at_end=True,
            metric_for_best_model="eval_loss",
            greater_is_better=False,
        )
    return dict(
        save_strategy="steps" if request.save_steps > 0 else "no",
        save_steps=request.save_steps if request.save_steps > 0 else 500,
    )


def tracker_args(request: TrainingStartRequest, run_name: Optional[str]) -> dict[str, Any]:
    """``SFTConfig``'s tracker settings: ``report_to`` = the request's trackers once each ("none"
    for none), ``run_name`` (the job id; None: transformers' default) and ``project``
    (``trackers.TRACKER_PROJECT``, trackio's project), with trackio's Space snapshot off (logs stay local)."""
    from trainer_core.training.trackers import TRACKER_PROJECT

    return dict(
        report_to=list(dict.fromkeys(request.report_to)) or "none",
        run_name=run_name,
        project=TRACKER_PROJECT,
        trackio_static_space_id=False,
    )


def optimizer_for(optim: str, device: str) -> str:
    """``adamw_torch`` becomes the fused ``adamw_torch_fused`` on CUDA (the usual GPU choice; one
    kernel for all parameters). Not measured here: this machine has no GPU (docs/BENCHMARKS.md).
    Other optimizers, and every optimizer on CPU, are left as asked."""
    return "adamw_torch_fused" if device == "cuda" and optim == "adamw_torch" else optim


def build_lora_config(request: TrainingStartRequest, model: Any) -> Optional[Any]:
    """``peft.LoraConfig`` for lora/qlora requests on ``model`` (the loaded base); None for full
    fine-tuning. The targets are found in the model (``models.targets.resolve_targets``: the
    request's ``target_modules`` and its attention / MLP switches); 3-D expert parameters go to
    ``target_parameters``, and then ``lora_dropout`` is 0 (PEFT's ``lora.ParamWrapper`` has no
    dropout), said in the worker's log. ``modules_to_save`` train in full beside the adapters (a
    tied LM head kept tied: ``ensure_weight_tying``). Raises ``TargetError`` (a ValueError naming
    ``target_modules`` or ``modules_to_save``) when they select nothing or name what the model lacks."""
    if request.training_type == TrainingType.full:
        return None
    from peft import LoraConfig

    from trainer_core.models.embeddings import ties_embeddings
    from trainer_core.models.lora_plan import lora_plan

    plan = lora_plan(model, request)
    targets = plan.targets
    dropout = request.lora_dropout
    if targets.parameters and dropout:
        log.info("lora_dropout %s -> 0: the experts' adapters (target_parameters) take no dropout", dropout)
        dropout = 0.0
    return LoraConfig(
        r=request.lora_r,
        lora_alpha=request.lora_alpha,
        lora_dropout=dropout,
        target_modules=targets.peft_target_modules(),
        target_parameters=targets.peft_target_parameters(),
        modules_to_save=list(request.modules_to_save) or None,
        # A tied LM head stays tied to the trained embeddings (and the other way round).
        ensure_weight_tying=bool(plan.saved) and ties_embeddings(model),
        use_rslora=request.use_rslora,
        bias="none",
        task_type="CAUSAL_LM",
    )
