"""How the run optimises: its length (epochs or steps), learning rates, batch, warm-up, saving,
regularisation, seed, packing, optimizer and schedule, precision, early stopping, the divergence
guard and which tokens count in the loss."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from trainer_core.request.base import FieldGroup, in_section
from trainer_core.vocabulary import Optimizer, Scheduler, WholeNumber, method_defaults_text


class HyperparameterFields(FieldGroup):
    """The hyperparameters' fields (section ``training``)."""

    num_epochs: float = Field(
        3.0,
        ge=0,
        le=1000,
        description="Passes over the data (num_train_epochs); ignored when max_steps > 0. 3 lets a small dataset be learned (measured: 1 pass over 91 rows changed no answer, 3 passes taught all 4 held-out answers); on thousands of rows 1 is usually enough: the pre-flight check shows the steps and time.",
        json_schema_extra=in_section("training"),
    )
    max_steps: WholeNumber = Field(
        0,
        ge=0,
        le=10_000_000,
        description="Optimizer steps to run; 0 means use num_epochs. The pre-flight check warns below 60 steps when that is also under 3 passes over the data.",
        json_schema_extra=in_section("training"),
    )
    learning_rate: float = Field(
        1e-3,
        gt=0,
        lt=1,
        description=f"Peak learning rate (a positive number below 1); {method_defaults_text('learning_rate')}. 1e-3 suits LoRA on small models (measured over 3 epochs of 91 rows: 1e-3 learned the answers exactly, 2e-4 only half); models of several billion parameters usually want 1e-4 to 2e-4, full fine-tuning about 2e-5.",
        json_schema_extra=in_section("training"),
    )
    embedding_learning_rate: Optional[float] = Field(
        None,
        gt=0,
        lt=1,
        title="Embedding learning rate",
        description="The learning rate of the embeddings and LM head when they train (listed in modules_to_save with LoRA, or full fine-tuning); empty (0 on the page): learning_rate. For new tokens or a new language, 2-10x below learning_rate (e.g. 5e-6 with 5e-5) keeps the existing tokens intact.",
        json_schema_extra=in_section("training"),
    )
    batch_size: WholeNumber = Field(
        4,
        ge=1,
        le=1024,
        description="Rows per device per step (per_device_train_batch_size).",
        json_schema_extra=in_section("training"),
    )
    gradient_accumulation_steps: WholeNumber = Field(
        1,
        ge=1,
        le=1024,
        description="Micro-batches summed before each optimizer step.",
        json_schema_extra=in_section("training"),
    )
    warmup_steps: WholeNumber = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Linear warm-up length in steps (use this or warmup_ratio).",
        json_schema_extra=in_section("training"),
    )
    warmup_ratio: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Warm-up length as a fraction of all steps (use this or warmup_steps).",
        json_schema_extra=in_section("training"),
    )
    save_steps: WholeNumber = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Save a resumable checkpoint every this many steps; 0: none in between (the final weights are always saved at the end, and a Stop saves a checkpoint).",
        json_schema_extra=in_section("training"),
    )
    weight_decay: float = Field(
        0.0, ge=0, le=1, description="AdamW weight decay.", json_schema_extra=in_section("training")
    )
    max_grad_norm: float = Field(
        1.0,
        ge=0,
        le=1000,
        description="Gradient clipping norm; 0 disables clipping.",
        json_schema_extra=in_section("training"),
    )
    random_seed: WholeNumber = Field(
        42,
        ge=0,
        le=2**32 - 1,
        description="Seed for data order and initialisation.",
        json_schema_extra=in_section("training"),
    )
    packing: bool = Field(
        False,
        description="Pack several rows into each max_seq_length sequence.",
        json_schema_extra=in_section("training"),
    )
    optim: Optimizer = Field(
        "adamw_torch",
        title="Optimizer (optim)",
        description="Optimizer (transformers OptimizerNames).",
        json_schema_extra=in_section("training"),
    )
    lr_scheduler_type: Scheduler = Field(
        "cosine",
        title="Learning-rate schedule (lr_scheduler_type)",
        description="Learning-rate schedule after warm-up.",
        json_schema_extra=in_section("training"),
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass: less memory, slower steps.",
        json_schema_extra=in_section("training"),
    )
    mixed_precision: Literal["auto", "bf16", "no"] = Field(
        "auto",
        title="Mixed precision",
        description="auto: bf16 where the device has fast bf16 units (a bf16 GPU; a CPU with AMX or AVX512-BF16 whose bf16 "
        "products measure faster than fp32, SFT only), fp32 elsewhere; bf16: bf16 mixed precision (trained weights stay "
        "fp32); no: fp32 throughout. The choice and its reason are in the check and run.json.",
        json_schema_extra=in_section("training"),
    )
    early_stopping_patience: WholeNumber = Field(
        0,
        ge=0,
        le=1000,
        description="Stop when eval_loss has not improved for this many evaluations in a row (every eval_steps); 0: off. Needs evaluation data; a checkpoint is saved at every evaluation and the best one is loaded at the end.",
        json_schema_extra=in_section("training"),
    )
    early_stopping_threshold: float = Field(
        0.0,
        ge=0,
        le=1000,
        description="Smallest drop of eval_loss (nats per token) that counts as an improvement for early stopping.",
        json_schema_extra=in_section("training"),
    )
    stop_on_divergence: bool = Field(
        True,
        description="End the run in error when it diverges: a NaN or infinite loss or grad norm, a loss that explodes (above 4x its start and 2 nats above it for 2 logged steps) or, in SFT, collapses to a uniform guess (ln of the vocabulary with no gradient for 3 logged steps). No NaN weights are saved; the message names the last checkpoint before the trouble, to resume from.",
        json_schema_extra=in_section("training"),
    )
    train_on_completions: bool = Field(
        True,
        description="Count only assistant tokens in the loss (every assistant turn).",
        json_schema_extra=in_section("training"),
    )
