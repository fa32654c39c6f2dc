"""Pydantic models shared by the engine, the UI, the CLI and (later) the HTTP API.

Every request field carries its description, default and bounds exactly once, here; the UI builds
its widgets and the CLI its flags from this metadata (``json_schema_extra["group"]`` says which
form section a field belongs to).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StringConstraints, field_validator, model_validator

from trainer_core.hub_ids import hub_id_problem
from trainer_core.refusals import Refusal
from trainer_core.reward_schemas import RewardSpec, json_text, parse_reward
from trainer_core.vocabulary import (
    METHOD_DEFAULTS,
    Compute,
    DefaultTemplate,
    Distributed,
    DpoLoss,
    FormatType,
    GrpoLoss,
    Optimizer,
    OptionalWholeNumber,
    Scheduler,
    Tracker,
    TrainingMethod,
    TrainingType,
    WholeNumber,
    method_defaults_text,
)

DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
LLAMA_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
WANDB_PROJECT = re.compile(r"[A-Za-z0-9_.-]{1,128}")
# Request fields that hold secrets: left out of public_dict (logs, run.json, the queue, settings files).
SECRET_FIELDS = ("hf_token", "wandb_token")
# (report_to name, the seed API's switch, the seed's settings that imply it)
SEED_TRACKERS = (
    ("tensorboard", "enable_tensorboard", ("tensorboard_dir",)),
    ("wandb", "enable_wandb", ("wandb_project", "wandb_token")),
)
HOST_PORT = re.compile(r"([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})")  # host:port, [v6]:port
STORAGE_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "hdfs")  # filesystems pyarrow opens for Ray Train
STORAGE_URI = re.compile(rf"(?:{'|'.join(STORAGE_SCHEMES)})://[A-Za-z0-9._\-]+(?:/(?!\.\.(?:/|$))[A-Za-z0-9._\-]+)*/?")
RESOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,63}")
GPU_IDS = re.compile(r"[ ]*[0-9]{1,3}([ ]*,[ ]*[0-9]{1,3}){0,63}[ ]*")  # e.g. "0,1" (CUDA_VISIBLE_DEVICES), ASCII only


def _group(name: str, methods: tuple[str, ...] = ()) -> dict[str, Any]:
    """A field's form section and, for method-specific fields, the training methods it applies to
    (the form shows it only for those)."""
    return {"group": name, "methods": list(methods)} if methods else {"group": name}


# Length limits on every free-text field: a path is at most PATH_MAX (4096) bytes on Linux; names
# and ids far less. An over-long value is a 422 naming the field, never an OSError deep inside.
MAX_PATH_CHARS = 4096
MAX_NAME_CHARS = 256
MAX_FILES = 64
PathText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS)]
NameText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]


class TrainingStartRequest(BaseModel):
    """Everything one fine-tuning run needs. Field names follow the seed API; ``config.py`` maps
    ``batch_size``, ``num_epochs`` and ``max_seq_length`` to the transformers/TRL names.

    Raises ``pydantic.ValidationError`` naming the field for any value out of bounds or any
    contradictory combination (see ``_check_combinations``).
    """

    model_config = ConfigDict(extra="forbid", use_enum_values=False, allow_inf_nan=False)

    # --- model ---
    model_name: str = Field(
        DEFAULT_MODEL,
        min_length=1,
        max_length=1024,
        description="Hub model id (owner/name) or the absolute path of a model folder in an allowed folder.",
        json_schema_extra=_group("model"),
    )
    training_type: TrainingType = Field(
        TrainingType.lora,
        description="lora: train adapters; qlora: adapters on a 4-bit base; full: all weights.",
        json_schema_extra=_group("model"),
    )
    trust_remote_code: bool = Field(
        False,
        title="Trust remote code",
        description=(
            "Run the Python code a model ships (its config.json auto_map) to build it; only for code you trust. "
            "The server must allow it (STUDIO_ALLOW_REMOTE_CODE=1)."
        ),
        json_schema_extra=_group("model"),
    )
    use_lora: Optional[bool] = Field(
        None,
        title="Use LoRA",
        description=(
            "The seed API's switch, accepted as it sends it: true means training_type lora (or qlora), "
            "false means full. When given with training_type the two must agree; alone, false selects full."
        ),
        json_schema_extra={"group": "model", "form": False},
    )
    load_in_4bit: bool = Field(
        False,
        title="Load in 4-bit",
        description="Load the base model in 4-bit NF4 (bitsandbytes). Only with training_type=qlora, which turns it on.",
        json_schema_extra=_group("model"),
    )
    max_seq_length: WholeNumber = Field(
        512,
        ge=16,
        le=32768,
        description="Longest training sequence in tokens; longer rows are truncated (and counted).",
        json_schema_extra=_group("model"),
    )
    hf_token: Optional[SecretStr] = Field(
        None,
        max_length=512,
        title="Hugging Face token",
        description="Hugging Face token for gated or private models and datasets. Never logged or stored.",
        json_schema_extra=_group("model"),
    )
    # --- method ---
    training_method: TrainingMethod = Field(
        TrainingMethod.sft,
        title="Training method",
        description="sft: learn the answers (conversations, instructions or raw text). dpo / orpo: learn to prefer the chosen answer over the rejected one (pairs); orpo needs no reference model. kto: learn from answers rated desirable or undesirable (a true/false label; pairs are unpaired). grpo: sample several answers per prompt and learn from the rewards they earn (prompts, plus columns such as answer for the rewards).",
        json_schema_extra=_group("method"),
    )
    beta: float = Field(
        0.1,
        ge=0,
        le=10,
        title="Beta",
        description="DPO / KTO: how far the model may move from the reference model (higher: stays closer; 0.1 is the papers' usual value). ORPO: the weight of the odds-ratio term beside the answer loss. GRPO: the weight of the KL penalty to the reference model (0: no reference model, no KL chart); "
        f"{method_defaults_text('beta')} (DeepSeekMath's).",
        json_schema_extra=_group("method", ("dpo", "orpo", "kto", "grpo")),
    )
    loss_type: DpoLoss = Field(
        "sigmoid",
        title="DPO loss type",
        description="sigmoid: the DPO paper's loss; hinge (SLiC), ipo, robust (noisy labels), bco_pair, sppo_hard, nca_pair, apo_zero, apo_down: TRL's variants.",
        json_schema_extra=_group("method", ("dpo",)),
    )
    desirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="KTO: weight of the desirable answers' loss; raise it when there are fewer desirable than undesirable rows (the KTO paper keeps weight x count between 1 and 4/3 of the other side).",
        json_schema_extra=_group("method", ("kto",)),
    )
    undesirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="KTO: weight of the undesirable answers' loss.",
        json_schema_extra=_group("method", ("kto",)),
    )
    num_generations: WholeNumber = Field(
        4,
        ge=2,
        le=64,
        title="Answers per prompt",
        description="GRPO: completions sampled for each prompt; each is scored against the others of its group (batch_size x gradient_accumulation_steps must be a multiple of it).",
        json_schema_extra=_group("method", ("grpo",)),
    )
    max_completion_length: WholeNumber = Field(
        128,
        ge=1,
        le=32768,
        title="Max answer tokens",
        description="GRPO: the longest completion sampled, in tokens (longer ones are cut and count as clipped).",
        json_schema_extra=_group("method", ("grpo",)),
    )
    temperature: float = Field(
        1.0,
        gt=0,
        le=4,
        title="Sampling temperature",
        description="GRPO: temperature of the sampled completions (lower: surer, less varied answers, so smaller reward differences to learn from).",
        json_schema_extra=_group("method", ("grpo",)),
    )
    grpo_loss_type: GrpoLoss = Field(
        "dapo",
        title="GRPO loss type",
        description="GRPO: how token losses are averaged (TRL's GRPOConfig.loss_type; also accepted as loss_type with training_method grpo). dapo: over the batch's tokens (no length bias); grpo: per completion (the paper's); dr_grpo: by a constant; bnpo, cispo, sapo: TRL's variants.",
        json_schema_extra=_group("method", ("grpo",)),
    )
    rewards: list[RewardSpec] = Field(
        default_factory=list,
        max_length=16,
        title="Rewards",
        description='GRPO: the reward functions and their weights, e.g. [{"name": "numeric_match", "column": "answer"}, {"name": "format", "weight": 0.5}]. Empty: the numeric match of the final answer against the data\'s answer column.',
        json_schema_extra=_group("method", ("grpo",)),
    )
    reward_file: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Reward functions file",
        description="GRPO: a Python file of reward functions in TRL's signature, in the allowed folders; runs inside the training worker, so only servers started with STUDIO_ALLOW_REWARD_CODE=1 accept it.",
        json_schema_extra=_group("method", ("grpo",)),
    )
    adapter_name_or_path: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Start from adapter",
        description="The folder of a LoRA adapter trained earlier (e.g. an SFT run's output) to go on training: a DPO / ORPO / KTO run starts from the SFT model, which is also DPO's and KTO's reference. Needs training_type lora or qlora and the adapter's base model.",
        json_schema_extra=_group("method"),
    )
    # --- data ---
    hf_dataset: Optional[str] = Field(
        None,
        max_length=200,
        title="Hub dataset",
        description="Hub dataset id, e.g. tatsu-lab/alpaca (files on the server go in local_datasets).",
        json_schema_extra=_group("data"),
    )
    local_datasets: list[PathText] = Field(
        default_factory=list,
        max_length=MAX_FILES,
        description="Training files (.json, .jsonl, .csv, .parquet, .txt).",
        json_schema_extra=_group("data"),
    )
    local_eval_datasets: list[PathText] = Field(
        default_factory=list,
        max_length=MAX_FILES,
        description="Evaluation files, same formats as the training files.",
        json_schema_extra=_group("data"),
    )
    format_type: FormatType = Field(
        FormatType.auto,
        description="Dataset layout; auto detects it from the columns.",
        json_schema_extra=_group("data"),
    )
    default_chat_template: DefaultTemplate = Field(
        "auto",
        title="Chat template for models without one",
        description="How conversations are written for a model that ships no chat template (base models; a model with its own always keeps it). auto: ChatML when the tokenizer has <|im_start|> / <|im_end|> tokens, else zephyr (<|user|> ... eos), which stops where the model's eos stops. chatml, zephyr or alpaca (### Instruction / ### Response) by name. The check shows the one used; the run saves it with its tokenizer.",
        json_schema_extra=_group("data"),
    )
    custom_format_mapping: dict[NameText, NameText] = Field(
        default_factory=dict,
        max_length=32,
        description="Our column name -> the file's column, e.g. instruction -> question, output -> answer.",
        json_schema_extra=_group("data"),
    )
    subset: Optional[str] = Field(
        None,
        max_length=MAX_NAME_CHARS,
        description="Hub dataset configuration (subset) name.",
        json_schema_extra=_group("data"),
    )
    train_split: str = Field(
        "train",
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="The Hub dataset's split used for training (local files are read whole).",
        json_schema_extra=_group("data"),
    )
    eval_split: Optional[str] = Field(
        None,
        max_length=MAX_NAME_CHARS,
        description="Hub split used for evaluation (none: no evaluation unless eval files or val_size are given).",
        json_schema_extra=_group("data"),
    )
    val_size: float = Field(
        0.0,
        ge=0,
        le=0.5,
        title="Validation fraction (val_size)",
        description="Share of the training rows held out as the evaluation set (0..0.5; 0: none), split with random_seed so evaluation can rebuild it. Not together with eval files or eval_split.",
        json_schema_extra=_group("data"),
    )
    eval_steps: WholeNumber = Field(
        50,
        ge=1,
        le=1_000_000,
        description="Evaluate every this many optimizer steps (when there is evaluation data).",
        json_schema_extra=_group("data"),
    )
    dataset_slice_start: WholeNumber = Field(
        0, ge=0, description="First training row to use (0-based).", json_schema_extra=_group("data")
    )
    dataset_slice_end: WholeNumber = Field(
        0,
        ge=0,
        description="Row after the last one to use (exclusive); 0: to the end.",
        json_schema_extra=_group("data"),
    )
    # --- hyperparameters ---
    num_epochs: float = Field(
        3.0,
        ge=0,
        le=1000,
        description="Passes over the data (num_train_epochs); ignored when max_steps > 0. 3 lets a small dataset be learned (measured: 1 pass over 91 rows changed no answer, 3 passes taught all 4 held-out answers); on thousands of rows 1 is usually enough: the pre-flight check shows the steps and time.",
        json_schema_extra=_group("training"),
    )
    max_steps: WholeNumber = Field(
        0,
        ge=0,
        le=10_000_000,
        description="Optimizer steps to run; 0 means use num_epochs. The pre-flight check warns below 60 steps when that is also under 3 passes over the data.",
        json_schema_extra=_group("training"),
    )
    learning_rate: float = Field(
        1e-3,
        gt=0,
        lt=1,
        description=f"Peak learning rate (a positive number below 1); {method_defaults_text('learning_rate')}. 1e-3 suits LoRA on small models (measured over 3 epochs of 91 rows: 1e-3 learned the answers exactly, 2e-4 only half); models of several billion parameters usually want 1e-4 to 2e-4, full fine-tuning about 2e-5.",
        json_schema_extra=_group("training"),
    )
    embedding_learning_rate: Optional[float] = Field(
        None,
        gt=0,
        lt=1,
        title="Embedding learning rate",
        description="The learning rate of the embeddings and LM head when they train (listed in modules_to_save with LoRA, or full fine-tuning); empty (0 on the page): learning_rate. For new tokens or a new language, 2-10x below learning_rate (e.g. 5e-6 with 5e-5) keeps the existing tokens intact.",
        json_schema_extra=_group("training"),
    )
    batch_size: WholeNumber = Field(
        4,
        ge=1,
        le=1024,
        description="Rows per device per step (per_device_train_batch_size).",
        json_schema_extra=_group("training"),
    )
    gradient_accumulation_steps: WholeNumber = Field(
        1,
        ge=1,
        le=1024,
        description="Micro-batches summed before each optimizer step.",
        json_schema_extra=_group("training"),
    )
    warmup_steps: WholeNumber = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Linear warm-up length in steps (use this or warmup_ratio).",
        json_schema_extra=_group("training"),
    )
    warmup_ratio: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Warm-up length as a fraction of all steps (use this or warmup_steps).",
        json_schema_extra=_group("training"),
    )
    save_steps: WholeNumber = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Save a resumable checkpoint every this many steps; 0: none in between (the final weights are always saved at the end, and a Stop saves a checkpoint).",
        json_schema_extra=_group("training"),
    )
    weight_decay: float = Field(
        0.0, ge=0, le=1, description="AdamW weight decay.", json_schema_extra=_group("training")
    )
    max_grad_norm: float = Field(
        1.0,
        ge=0,
        le=1000,
        description="Gradient clipping norm; 0 disables clipping.",
        json_schema_extra=_group("training"),
    )
    random_seed: WholeNumber = Field(
        42,
        ge=0,
        le=2**32 - 1,
        description="Seed for data order and initialisation.",
        json_schema_extra=_group("training"),
    )
    packing: bool = Field(
        False, description="Pack several rows into each max_seq_length sequence.", json_schema_extra=_group("training")
    )
    optim: Optimizer = Field(
        "adamw_torch",
        title="Optimizer (optim)",
        description="Optimizer (transformers OptimizerNames).",
        json_schema_extra=_group("training"),
    )
    lr_scheduler_type: Scheduler = Field(
        "cosine",
        title="Learning-rate schedule (lr_scheduler_type)",
        description="Learning-rate schedule after warm-up.",
        json_schema_extra=_group("training"),
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the backward pass: less memory, slower steps.",
        json_schema_extra=_group("training"),
    )
    mixed_precision: Literal["auto", "bf16", "no"] = Field(
        "auto",
        title="Mixed precision",
        description="auto: bf16 where the device has fast bf16 units (a bf16 GPU; a CPU with AMX or AVX512-BF16 whose bf16 "
        "products measure faster than fp32, SFT only), fp32 elsewhere; bf16: bf16 mixed precision (trained weights stay "
        "fp32); no: fp32 throughout. The choice and its reason are in the check and run.json.",
        json_schema_extra=_group("training"),
    )
    early_stopping_patience: WholeNumber = Field(
        0,
        ge=0,
        le=1000,
        description="Stop when eval_loss has not improved for this many evaluations in a row (every eval_steps); 0: off. Needs evaluation data; a checkpoint is saved at every evaluation and the best one is loaded at the end.",
        json_schema_extra=_group("training"),
    )
    early_stopping_threshold: float = Field(
        0.0,
        ge=0,
        le=1000,
        description="Smallest drop of eval_loss (nats per token) that counts as an improvement for early stopping.",
        json_schema_extra=_group("training"),
    )
    stop_on_divergence: bool = Field(
        True,
        description="End the run in error when it diverges: a NaN or infinite loss or grad norm, a loss that explodes (above 4x its start and 2 nats above it for 2 logged steps) or, in SFT, collapses to a uniform guess (ln of the vocabulary with no gradient for 3 logged steps). No NaN weights are saved; the message names the last checkpoint before the trouble, to resume from.",
        json_schema_extra=_group("training"),
    )
    train_on_completions: bool = Field(
        True,
        description="Count only assistant tokens in the loss (every assistant turn).",
        json_schema_extra=_group("training"),
    )
    # --- images (vision-language models) ---
    is_dataset_image: Optional[bool] = Field(
        None,
        title="Data has images",
        description=(
            "Empty: found from the data (an images column, a Hub Image column or image content parts). On: the data "
            "must hold images (refused when no row has one). Off: rows with images are refused. Images need a "
            "vision-language model (Qwen2-VL, Qwen2.5-VL, Gemma 3, SmolVLM, LLaVA, ...)."
        ),
        json_schema_extra={**_group("data"), "vision": True},
    )
    vision_image_size: OptionalWholeNumber = Field(
        None,
        ge=28,
        le=4096,
        title="Image size (px, longest side)",
        description=(
            "Vision models: each image is shrunk so that its longest side is at most this many pixels before the "
            "model's processor sees it (fewer image tokens for models that read images at their own size, such as "
            "Qwen2-VL); empty: as the files are, within the processor's own pixel budget."
        ),
        json_schema_extra={**_group("data"), "vision": True},
    )
    # --- LoRA ---
    lora_r: WholeNumber = Field(
        16, ge=1, le=1024, title="LoRA rank (lora_r)", description="LoRA rank.", json_schema_extra=_group("lora")
    )
    lora_alpha: WholeNumber = Field(
        32,
        ge=1,
        le=4096,
        title="LoRA alpha",
        description="LoRA scaling numerator (scale = lora_alpha / lora_r, or / sqrt(r) with rsLoRA).",
        json_schema_extra=_group("lora"),
    )
    lora_dropout: float = Field(
        0.0,
        ge=0,
        lt=1,
        title="LoRA dropout",
        description="Dropout on the LoRA input (0: none, PEFT's default; each adapted layer then skips a random mask "
        "and a copy of its input, 28 % of a step's time on a CPU, with the same held-out loss in our measurement: "
        "docs/BENCHMARKS.md).",
        json_schema_extra=_group("lora"),
    )
    target_modules: list[NameText] = Field(
        default_factory=lambda: ["all-linear"],
        min_length=1,
        max_length=256,
        description=(
            '["all-linear"]: every linear projection inside the transformer blocks of the loaded model '
            "(attention and MLP, fused ones included; never lm_head, embeddings or MoE routers). "
            "Or module names, matched as PEFT does (the name or the end of a module path); each must "
            "match something in the model."
        ),
        json_schema_extra=_group("lora"),
    )
    modules_to_save: list[NameText] = Field(
        default_factory=list,
        max_length=16,
        title="Train in full (modules_to_save)",
        description="With LoRA: modules trained in full beside the adapters and saved with them, e.g. embed_tokens and lm_head, to teach new tokens or a new language. Matched as PEFT matches them (the path or its last parts); a name that misses is refused with the model's embedding modules. A tied LM head stays tied to the trained embeddings.",
        json_schema_extra=_group("lora"),
    )
    use_loftq: bool = Field(
        False,
        title="LoftQ initialisation",
        description="QLoRA only: initialise the adapters with PEFT's LoftQ so that base + adapter starts closer to the full-precision model (Li et al. 2023); runs on a CUDA GPU and reads the model's safetensors files.",
        json_schema_extra=_group("lora"),
    )
    finetune_attention_modules: bool = Field(
        True,
        title="Adapt attention",
        description='With target_modules ["all-linear"]: adapt the attention projections of every block.',
        json_schema_extra=_group("lora"),
    )
    finetune_language_layers: bool = Field(
        True,
        title="Adapt language layers",
        description=(
            'With target_modules ["all-linear"]: adapt the language model\'s blocks (a text-only model has '
            "nothing else, so this stays on for it; a vision model may train its vision layers alone)."
        ),
        json_schema_extra=_group("lora"),
    )
    finetune_vision_layers: bool = Field(
        False,
        title="Adapt vision layers",
        description=(
            'Vision models, with target_modules ["all-linear"]: also adapt the linear layers of the vision tower\'s '
            "blocks and of the projector that feeds the language model (off: they stay frozen, as LLaMA-Factory's "
            "freeze_vision_tower has it; on costs memory and time for images unlike the base model's)."
        ),
        json_schema_extra={**_group("lora"), "vision": True},
    )
    finetune_mlp_modules: bool = Field(
        True,
        title="Adapt MLP",
        description='With target_modules ["all-linear"]: adapt the MLP projections (and MoE experts) of every block.',
        json_schema_extra=_group("lora"),
    )
    use_rslora: bool = Field(
        False,
        title="Use rsLoRA",
        description="Rank-stabilised LoRA scaling (alpha / sqrt(r)).",
        json_schema_extra=_group("lora"),
    )
    # --- output ---
    output_dir: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        description="A new or empty folder for checkpoints and the result; empty: <data dir>/runs/<job id>.",
        json_schema_extra=_group("output"),
    )
    resume_from_checkpoint: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        description="Checkpoint folder to continue from.",
        json_schema_extra=_group("output"),
    )
    # --- devices and processes ---
    num_processes: WholeNumber = Field(
        1,
        ge=1,
        le=64,
        title="Processes (num_processes)",
        description="Training processes on this machine: 1 trains in one process; more train data-parallel (torchrun launches them; each process on its own GPU, or on its share of the CPU cores with the gloo backend). Every process takes batch_size rows per step, so a step trains batch_size x gradient_accumulation_steps x num_processes rows (the global batch).",
        json_schema_extra=_group("distributed"),
    )
    gpu_ids: Optional[str] = Field(
        None,
        max_length=256,
        title="GPU ids",
        description="The GPUs to train on, e.g. 0,1 (CUDA_VISIBLE_DEVICES; one process per GPU); empty: the first num_processes GPUs, or the CPU on a machine without CUDA GPUs.",
        json_schema_extra=_group("distributed"),
    )
    num_nodes: WholeNumber = Field(
        1,
        ge=1,
        le=64,
        title="Machines (num_nodes)",
        description="torchrun across machines: how many machines train together, each running the studio's CLI with the same settings and its own node_rank (num_processes processes on each). 1: this machine only.",
        json_schema_extra=_group("distributed"),
    )
    node_rank: WholeNumber = Field(
        0,
        ge=0,
        le=63,
        title="This machine's number (node_rank)",
        description="num_nodes > 1: this machine's number, 0 to num_nodes - 1; machine 0 is the one at rdzv_endpoint, holds rank 0 and writes the adapter and checkpoints.",
        json_schema_extra=_group("distributed"),
    )
    rdzv_endpoint: Optional[str] = Field(
        None,
        max_length=256,
        title="Rendezvous address (rdzv_endpoint)",
        description="num_nodes > 1: machine 0's address and a free port, host:port, the same on every machine (torchrun's --rdzv-endpoint; every machine must reach it).",
        json_schema_extra=_group("distributed"),
    )
    distributed: Distributed = Field(
        "ddp",
        title="Distributed strategy",
        description="With several processes: ddp keeps a whole copy of the model in each (PyTorch DistributedDataParallel); fsdp shards it across GPUs as your accelerate config file says (accelerate launch); deepspeed shards it as your DeepSpeed JSON says (ZeRO). fsdp and deepspeed need CUDA GPUs and a config file.",
        json_schema_extra=_group("distributed"),
    )
    compute: Compute = Field(
        "local",
        title="Compute",
        description='local: the processes run on this machine (num_processes); ray: on a Ray cluster through Ray Train\'s TorchTrainer (num_workers workers, each running the same training worker; needs ray installed: pip install "finetune-studio[ray]").',
        json_schema_extra=_group("distributed"),
    )
    ray_address: Optional[str] = Field(
        None,
        max_length=256,
        title="Ray address",
        description="compute ray: the cluster to run on, host:port of its head (ray start --head prints it; 6379 by default) or ray://host:10001 (Ray Client).",
        json_schema_extra={**_group("distributed"), "compute": "ray"},
    )
    num_workers: WholeNumber = Field(
        1,
        ge=1,
        le=256,
        title="Ray workers (num_workers)",
        description="compute ray: how many Ray Train workers train data-parallel (each takes batch_size rows per step, like a process of num_processes).",
        json_schema_extra={**_group("distributed"), "compute": "ray"},
    )
    resources_per_worker: dict[str, float] = Field(
        default_factory=lambda: {"CPU": 1.0},
        max_length=8,
        title="Resources per worker",
        description="compute ray: what each worker reserves on the cluster, e.g. CPU=2, GPU=1 (Ray's resource names).",
        json_schema_extra={**_group("distributed"), "compute": "ray"},
    )
    use_gpu: bool = Field(
        False,
        title="Ray workers use GPUs",
        description="compute ray: each worker gets a GPU (Ray Train's use_gpu; NCCL between them); off: CPUs and gloo.",
        json_schema_extra={**_group("distributed"), "compute": "ray"},
    )
    ray_storage_path: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Ray storage path",
        description="compute ray, workers on other machines: a folder every node sees (NFS) or a URI such as s3://bucket/runs (Ray Train's storage_path). May be shared (and hold files), but not a studio folder or inside a run's folder. The studio copies the checked inputs into a new folder of the run's own there (studio-<job id>-<8 hex>), the workers train in a folder of their own and report checkpoints there, and the studio copies them into the run folder and deletes that folder only. Empty: the workers use the run folder directly (a cluster on this machine, or the data dir on a shared filesystem).",
        json_schema_extra={**_group("distributed"), "compute": "ray"},
    )
    distributed_config: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Distributed config file",
        description="fsdp: an accelerate config YAML with distributed_type: FSDP (write one with `accelerate config`); deepspeed: a DeepSpeed JSON config. A file in an allowed folder.",
        json_schema_extra=_group("distributed"),
    )
    report_to: list[Tracker] = Field(
        default_factory=list,
        max_length=4,
        title="Report to (trackers)",
        description="Also log the losses to these trackers (none: only the studio's own charts and metrics.jsonl). Files stay in the run folder: tensorboard -> tensorboard/ (event files), trackio -> trackio/ (its local store), wandb -> wandb/ (offline mode when wandb.ai cannot be reached; sync later with `wandb sync`), mlflow -> mlruns/ (unless MLFLOW_TRACKING_URI is set). Each needs its package installed on the server.",
        json_schema_extra=_group("output"),
    )

    # The seed API's tracker fields, accepted as it sends them and mapped onto report_to
    # (``_map_seed_trackers``); not on the form, which has report_to.
    enable_tensorboard: Optional[bool] = Field(
        None,
        title="Enable TensorBoard",
        description="The seed API's switch: true adds tensorboard to report_to; false must agree with it.",
        json_schema_extra={"group": "output", "form": False},
    )
    tensorboard_dir: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="TensorBoard folder",
        description="Where TensorBoard writes its event files: inside the run folder, or a new or empty folder in the allowed folders that obeys output_dir's rules (the run claims it; Delete removes its files); empty: <run folder>/tensorboard. Adds tensorboard to report_to.",
        json_schema_extra={"group": "output", "form": False},
    )
    enable_wandb: Optional[bool] = Field(
        None,
        title="Enable Weights & Biases",
        description="The seed API's switch: true adds wandb to report_to; false must agree with it.",
        json_schema_extra={"group": "output", "form": False},
    )
    wandb_project: Optional[str] = Field(
        None,
        max_length=128,
        title="W&B project",
        description="The Weights & Biases project of the run (letters, digits, '-', '_', '.'); empty: WANDB_PROJECT on the server, else finetune-studio. Adds wandb to report_to.",
        json_schema_extra={"group": "output", "form": False},
    )
    wandb_token: Optional[SecretStr] = Field(
        None,
        max_length=512,
        title="W&B API key",
        description="Weights & Biases API key for this run only (given to its worker as WANDB_API_KEY); empty: the server's own login. Never logged or stored. Adds wandb to report_to.",
        json_schema_extra={"group": "output", "form": False},
    )

    @field_validator(
        "output_dir",
        "resume_from_checkpoint",
        "adapter_name_or_path",
        "reward_file",
        "distributed_config",
        "tensorboard_dir",
        "subset",
        "eval_split",
    )
    @classmethod
    def _empty_is_none(cls, value: Optional[str]) -> Optional[str]:
        """Blank is "not set", in every optional path and Hub part (an API body's "" included)."""
        return value.strip() if value and value.strip() else None

    @field_validator("wandb_project")
    @classmethod
    def _project_name(cls, value: Optional[str]) -> Optional[str]:
        if not value or not value.strip():
            return None
        if not WANDB_PROJECT.fullmatch(value.strip()):
            raise ValueError(f"'{value[:40]}' is not a project name: use letters, digits, '-', '_' and '.'")
        return value.strip()

    @field_validator("wandb_token")
    @classmethod
    def _blank_key_is_none(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        return value if value is not None and value.get_secret_value().strip() else None

    @property
    def world_size(self) -> int:
        """How many processes train the run together: ``num_processes`` on each of ``num_nodes``
        machines (a Ray run's ``num_workers``: its num_processes)."""
        return self.num_processes * self.num_nodes

    def _check_nodes(self) -> None:
        """num_nodes > 1: a rendezvous address, a node_rank below num_nodes, torchrun (local compute,
        ddp or deepspeed); one machine: node_rank 0, no address."""
        if self.num_nodes == 1:
            if self.node_rank or self.rdzv_endpoint:
                raise Refusal(
                    "node_rank and rdzv_endpoint are read only with num_nodes > 1: set num_nodes, or clear them",
                    fields=("node_rank", "rdzv_endpoint", "num_nodes"),
                )
            return
        if not self.rdzv_endpoint:
            raise Refusal(
                "num_nodes > 1 needs rdzv_endpoint: machine 0's host:port, the same on every machine",
                fields=("num_nodes", "rdzv_endpoint"),
            )
        if self.node_rank >= self.num_nodes:
            raise Refusal(
                f"node_rank {self.node_rank} is not below num_nodes {self.num_nodes}: number the machines 0 to {self.num_nodes - 1}",
                fields=("node_rank", "num_nodes"),
            )
        if self.compute != "local":
            raise Refusal(
                "num_nodes counts torchrun's machines; a Ray cluster places its workers itself: set num_nodes 1 with compute ray",
                fields=("num_nodes", "compute"),
            )
        if self.distributed == "fsdp":
            raise Refusal(
                "num_nodes > 1 runs torchrun on each machine: choose ddp or deepspeed (fsdp goes through accelerate launch on one machine)",
                fields=("num_nodes", "distributed"),
            )

    def _check_ray(self) -> None:
        """compute ray: an address, ddp, no local GPU ids; num_processes follows num_workers (the
        group's size everywhere: the global batch, the steps, the launcher)."""
        if self.compute != "ray":
            if self.ray_address or self.ray_storage_path:
                raise Refusal(
                    "ray_address and ray_storage_path are read only with compute ray: choose ray, or clear them",
                    fields=("ray_address", "ray_storage_path", "compute"),
                )
            return
        if not self.ray_address:
            raise Refusal(
                "compute ray needs ray_address: the head's host:port (ray start --head prints it) or ray://host:10001",
                fields=("compute", "ray_address"),
            )
        if "num_processes" in self.model_fields_set and self.num_processes not in (1, self.num_workers):
            raise Refusal(
                "num_processes counts this machine's processes; with compute ray set num_workers instead",
                fields=("num_processes", "num_workers"),
            )
        if self.gpu_ids or self.distributed != "ddp":
            raise Refusal(
                "compute ray runs ddp workers that Ray places (use_gpu and resources_per_worker choose their GPUs): "
                "clear gpu_ids and choose distributed ddp",
                fields=("use_gpu", "resources_per_worker", "gpu_ids", "distributed"),
            )
        if any(value < 0 for value in self.resources_per_worker.values()):
            raise Refusal(
                "resources_per_worker: amounts must be 0 or more, e.g. CPU=2, GPU=1", fields=("resources_per_worker",)
            )
        self.num_processes = self.num_workers

    @field_validator("ray_address", "rdzv_endpoint")
    @classmethod
    def _host_and_port(cls, value: Optional[str], info: Any) -> Optional[str]:
        if value is None or not value.strip():
            return None
        value = value.strip()
        scheme = "ray://" if info.field_name == "ray_address" else ""
        match = HOST_PORT.fullmatch(value.removeprefix(scheme) if scheme else value)
        if match is None or not 1 <= int(match.group(2)) <= 65535:
            example = "10.0.0.1:6379 or ray://10.0.0.1:10001" if scheme else "10.0.0.1:29400"
            raise ValueError(f"'{value[:60]}' is not a host:port with a port from 1 to 65535, e.g. {example}")
        return value

    @field_validator("ray_storage_path")
    @classmethod
    def _storage_kind(cls, value: Optional[str]) -> Optional[str]:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if "://" in value and not STORAGE_URI.fullmatch(value):
            raise ValueError(
                f"'{value[:60]}' is neither a folder path nor a storage URI the cluster shares: give a folder (a "
                f"local path, which must be in the allowed folders) or {', '.join(STORAGE_SCHEMES)}://bucket/path"
            )
        return value

    @field_validator("resources_per_worker")
    @classmethod
    def _resource_names(cls, value: dict[str, float]) -> dict[str, float]:
        if not value or not any(amount > 0 for amount in value.values()):
            raise ValueError("each worker must reserve something, e.g. CPU=1 (or CPU=2, GPU=1)")
        for name in value:
            if not RESOURCE_NAME.fullmatch(name):
                raise ValueError(f"'{name[:40]}' is not a Ray resource name such as CPU, GPU or memory")
        return value

    @field_validator("gpu_ids")
    @classmethod
    def _gpu_numbers(cls, value: Optional[str]) -> Optional[str]:
        if not value or not value.strip():
            return None
        if not GPU_IDS.fullmatch(value):
            raise ValueError(f"'{value[:40]}' is not a list of GPU numbers such as 0,1 (see nvidia-smi)")
        return ",".join(part.strip() for part in value.split(","))

    @field_validator("rewards", mode="before")
    @classmethod
    def _short_rewards(cls, value: Any) -> Any:
        """Rewards given in the short form (``numeric_match column=answer weight=2``: the form's
        lines, the CLI's items) or as JSON text, read into ``RewardSpec`` values."""
        if isinstance(value, str) and value.strip().startswith("["):  # a JSON list pasted into the form's box
            value = json_text(value, "rewards")
        if isinstance(value, str):
            value = [line for line in value.splitlines() if line.strip()]
        if isinstance(value, list):
            return [parse_reward(item) if isinstance(item, str) else item for item in value]
        return value

    @field_validator("report_to")
    @classmethod
    def _trackers_once(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))  # a tracker named twice is one tracker

    @field_validator("hf_dataset")
    @classmethod
    def _hub_dataset_id(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and value.strip() and (problem := hub_id_problem(value.strip())):
            raise Refusal(
                f"'{value[:80]}' {problem}; files on the server go in local_datasets", fields=("local_datasets",)
            )
        return value.strip() if value and value.strip() else None

    @model_validator(mode="after")
    def _map_seed_trackers(self) -> TrainingStartRequest:
        """enable_tensorboard / tensorboard_dir and enable_wandb / wandb_project / wandb_token (the
        seed API's) onto ``report_to``: a switch set true, or a setting given, adds the tracker;
        a switch set false with the tracker asked for another way is refused."""
        for tracker, switch, settings in SEED_TRACKERS:
            on = getattr(self, switch)
            given = [name for name in settings if getattr(self, name) is not None]
            if on is False and (tracker in self.report_to or given):
                other = f"report_to {tracker}" if tracker in self.report_to else given[0]
                raise Refusal(
                    f"{switch} false disagrees with {other}: set {switch} true, or drop {other}",
                    fields=(switch, "report_to" if tracker in self.report_to else given[0]),
                )
            if (on or given) and tracker not in self.report_to:
                self.report_to = [*self.report_to, tracker]
        return self

    @model_validator(mode="after")
    def _check_combinations(self) -> TrainingStartRequest:
        if self.use_lora is not None:
            if "training_type" not in self.model_fields_set:
                self.training_type = TrainingType.lora if self.use_lora else TrainingType.full
            elif self.use_lora != (self.training_type != TrainingType.full):
                raise Refusal(
                    f"use_lora ({str(self.use_lora).lower()}) disagrees with training_type "
                    f"({self.training_type.value}): drop use_lora, or choose training_type "
                    f"{'lora or qlora' if self.use_lora else 'full'}",
                    fields=("use_lora", "training_type"),
                )
        if self.num_epochs == 0 and self.max_steps == 0:
            raise Refusal(
                "num_epochs and max_steps are both 0: set num_epochs > 0 or max_steps > 0",
                fields=("num_epochs", "max_steps"),
            )
        if self.training_type == TrainingType.qlora:
            self.load_in_4bit = True
        elif self.load_in_4bit:
            raise Refusal(
                "load_in_4bit is only used with training_type='qlora': choose qlora or turn load_in_4bit off",
                fields=("load_in_4bit", "training_type"),
            )
        if 0 < self.dataset_slice_end <= self.dataset_slice_start:
            raise Refusal(
                f"dataset_slice_end ({self.dataset_slice_end}) must be after dataset_slice_start ({self.dataset_slice_start})",
                fields=("dataset_slice_end", "dataset_slice_start"),
            )
        if self.val_size > 0 and (self.local_eval_datasets or self.eval_split):
            given = "local_eval_datasets" if self.local_eval_datasets else "eval_split"
            raise Refusal(
                f"val_size ({self.val_size}) and {given} both name evaluation data: split the training rows "
                f"with val_size, or give {given}, not both (set val_size to 0 to use {given})",
                fields=("val_size", given),
            )
        self._check_hub_parts()
        if self.warmup_steps > 0 and self.warmup_ratio > 0:
            raise Refusal("set either warmup_steps or warmup_ratio, not both", fields=("warmup_steps", "warmup_ratio"))
        if self.early_stopping_patience > 0 and not (
            self.val_size > 0 or self.local_eval_datasets or (self.hf_dataset and self.eval_split)
        ):
            raise Refusal(
                f"early_stopping_patience ({self.early_stopping_patience}) needs evaluation data: set val_size "
                "(e.g. 0.1) or give local_eval_datasets (or a Hub eval_split), or set early_stopping_patience to 0",
                fields=("early_stopping_patience", "val_size", "local_eval_datasets", "eval_split"),
            )
        if not self.hf_dataset and not self.local_datasets:
            raise Refusal(
                "no training data: give local_datasets (files) or hf_dataset (a hub id)",
                fields=("local_datasets", "hf_dataset"),
                code="no_training_data",
            )
        for name in ("learning_rate", "beta"):  # the method's own defaults (METHOD_DEFAULTS)
            if (name, self.training_method.value) in METHOD_DEFAULTS and name not in self.model_fields_set:
                setattr(self, name, METHOD_DEFAULTS[(name, self.training_method.value)])
        self._check_grpo()
        if self.training_method != TrainingMethod.sft and self.packing:
            raise Refusal(
                f"packing joins rows for SFT; training_method {self.training_method.value!r} compares whole "
                "answers: turn packing off",
                fields=("packing", "training_method"),
            )
        if self.adapter_name_or_path and self.training_type == TrainingType.full:
            raise Refusal(
                "adapter_name_or_path continues a LoRA adapter: choose training_type lora or qlora "
                "(or merge the adapter into a model and give that model for full training)",
                fields=("adapter_name_or_path", "training_type"),
            )
        self._check_ray()
        self._check_nodes()
        if self.distributed != "ddp" and not (self.distributed_config and self.num_processes > 1):
            raise Refusal(
                f"distributed {self.distributed!r} needs num_processes > 1 and distributed_config (your "
                f"{'accelerate FSDP YAML' if self.distributed == 'fsdp' else 'DeepSpeed JSON'}): set both, or choose ddp",
                fields=("distributed", "num_processes", "distributed_config"),
            )
        if self.distributed_config and self.distributed == "ddp":
            raise Refusal(
                "distributed_config is read only with distributed fsdp or deepspeed: choose one, or clear the file",
                fields=("distributed_config", "distributed"),
            )
        if self.modules_to_save and self.training_type == TrainingType.full:
            raise Refusal(
                "modules_to_save picks modules to train in full beside LoRA; with training_type full every weight trains: clear modules_to_save",
                fields=("modules_to_save", "training_type"),
            )
        if (
            self.embedding_learning_rate is not None
            and self.training_type != TrainingType.full
            and not self.modules_to_save
        ):
            raise Refusal(
                "embedding_learning_rate applies to embeddings that train: list them in modules_to_save "
                "(e.g. embed_tokens, lm_head), choose training_type full, or clear embedding_learning_rate",
                fields=("embedding_learning_rate", "modules_to_save", "training_type"),
            )
        if self.use_loftq and self.training_type != TrainingType.qlora:
            raise Refusal(
                "use_loftq initialises adapters against a 4-bit base: choose training_type qlora or turn use_loftq off",
                fields=("use_loftq", "training_type"),
            )
        if self.lora_r > 0 and any(not m.strip() for m in self.target_modules):
            raise Refusal("target_modules contains an empty name", fields=("target_modules",))
        return self

    @model_validator(mode="before")
    @classmethod
    def _grpo_loss_name(cls, data: Any) -> Any:
        """TRL's own name: ``loss_type`` with a GRPO loss and training_method grpo is ``grpo_loss_type``."""
        if isinstance(data, dict) and str(data.get("training_method", "")) in ("grpo", "TrainingMethod.grpo"):
            if data.get("loss_type") in GrpoLoss.__args__ and "grpo_loss_type" not in data:
                data = {**data, "grpo_loss_type": data["loss_type"]}
                data.pop("loss_type")
        return data

    def _check_hub_parts(self) -> None:
        """subset, train_split and eval_split pick parts of the Hub dataset: refused without
        hf_dataset (local files are read whole; train_split may stay "train"), and eval_split
        beside local_eval_datasets (the files would win). Raises ValueError naming the field."""
        if self.hf_dataset:
            if self.eval_split and self.local_eval_datasets:
                raise Refusal(
                    f"eval_split ({self.eval_split[:40]!r}) and local_eval_datasets both name evaluation data: "
                    "give the Hub split or the files, not both",
                    fields=("eval_split", "local_eval_datasets"),
                )
            return
        for name, value in (
            ("subset", self.subset),
            ("train_split", self.train_split),
            ("eval_split", self.eval_split),
        ):
            if value and not (name == "train_split" and value == "train"):
                fix = {
                    "subset": "clear subset",
                    "train_split": "leave train_split at 'train'",
                    "eval_split": "clear eval_split and give evaluation files in local_eval_datasets (or a val_size)",
                }[name]
                raise Refusal(
                    f"{name} ({value[:40]!r}) picks a part of a Hub dataset (hf_dataset); local files are read "
                    f"whole: {fix}, or give hf_dataset",
                    fields=(name, "hf_dataset", *(("local_eval_datasets", "val_size") if name == "eval_split" else ())),
                )

    def _check_grpo(self) -> None:
        """GRPO's settings together: a KL weight by default, groups that fill the batch, rewards
        only for GRPO. Raises ValueError naming the field."""
        if self.training_method != TrainingMethod.grpo:
            if self.rewards or self.reward_file:
                raise Refusal(
                    f"rewards and reward_file are read by training_method grpo, not {self.training_method.value}: "
                    "choose grpo, or clear them",
                    fields=("rewards", "reward_file", "training_method"),
                )
            if self.beta == 0:
                raise Refusal(
                    f"beta must be above 0 for training_method {self.training_method.value}",
                    fields=("beta", "training_method"),
                )
            return
        if self.packing:
            raise Refusal(
                "packing joins rows for SFT; GRPO samples answers to prompts: turn packing off", fields=("packing",)
            )
        per_step = self.batch_size * self.gradient_accumulation_steps
        if per_step % self.num_generations:
            raise Refusal(
                f"batch_size x gradient_accumulation_steps ({per_step}) must be a multiple of num_generations "
                f"({self.num_generations}): each step trains whole groups of answers to a prompt; e.g. set "
                f"batch_size to {self.num_generations}",
                fields=("batch_size", "gradient_accumulation_steps", "num_generations"),
            )

    def public_dict(self) -> dict[str, Any]:
        """The settings as plain JSON-able values with secrets removed (for logs, files, history)."""
        return self.model_dump(mode="json", exclude=set(SECRET_FIELDS))
