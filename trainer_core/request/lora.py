"""The LoRA adapters: rank, alpha, dropout, the modules they adapt (and those trained in full beside
them), LoftQ and rsLoRA."""

from __future__ import annotations

from pydantic import Field

from trainer_core.request.base import FieldGroup, NameText, in_section
from trainer_core.vocabulary import WholeNumber

LLAMA_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class LoraFields(FieldGroup):
    """The LoRA group's fields (section ``lora``)."""

    lora_r: WholeNumber = Field(
        16, ge=1, le=1024, title="LoRA rank (lora_r)", description="LoRA rank.", json_schema_extra=in_section("lora")
    )
    lora_alpha: WholeNumber = Field(
        32,
        ge=1,
        le=4096,
        title="LoRA alpha",
        description="LoRA scaling numerator (scale = lora_alpha / lora_r, or / sqrt(r) with rsLoRA).",
        json_schema_extra=in_section("lora"),
    )
    lora_dropout: float = Field(
        0.0,
        ge=0,
        lt=1,
        title="LoRA dropout",
        description="Dropout on the LoRA input (0: none, PEFT's default; each adapted layer then skips a random mask "
        "and a copy of its input, 28 % of a step's time on a CPU, with the same held-out loss in our measurement: "
        "docs/BENCHMARKS.md).",
        json_schema_extra=in_section("lora"),
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
        json_schema_extra=in_section("lora"),
    )
    modules_to_save: list[NameText] = Field(
        default_factory=list,
        max_length=16,
        title="Train in full (modules_to_save)",
        description="With LoRA: modules trained in full beside the adapters and saved with them, e.g. embed_tokens and lm_head, to teach new tokens or a new language. Matched as PEFT matches them (the path or its last parts); a name that misses is refused with the model's embedding modules. A tied LM head stays tied to the trained embeddings.",
        json_schema_extra=in_section("lora"),
    )
    use_loftq: bool = Field(
        False,
        title="LoftQ initialisation",
        description="QLoRA only: initialise the adapters with PEFT's LoftQ so that base + adapter starts closer to the full-precision model (Li et al. 2023); runs on a CUDA GPU and reads the model's safetensors files.",
        json_schema_extra=in_section("lora"),
    )
    finetune_attention_modules: bool = Field(
        True,
        title="Adapt attention",
        description='With target_modules ["all-linear"]: adapt the attention projections of every block.',
        json_schema_extra=in_section("lora"),
    )
    finetune_language_layers: bool = Field(
        True,
        title="Adapt language layers",
        description=(
            'With target_modules ["all-linear"]: adapt the language model\'s blocks (a text-only model has '
            "nothing else, so this stays on for it; a vision model may train its vision layers alone)."
        ),
        json_schema_extra=in_section("lora"),
    )
    finetune_vision_layers: bool = Field(
        False,
        title="Adapt vision layers",
        description=(
            'Vision models, with target_modules ["all-linear"]: also adapt the linear layers of the vision tower\'s '
            "blocks and of the projector that feeds the language model (off: they stay frozen, as LLaMA-Factory's "
            "freeze_vision_tower has it; on costs memory and time for images unlike the base model's)."
        ),
        json_schema_extra=in_section("lora", vision=True),
    )
    finetune_mlp_modules: bool = Field(
        True,
        title="Adapt MLP",
        description='With target_modules ["all-linear"]: adapt the MLP projections (and MoE experts) of every block.',
        json_schema_extra=in_section("lora"),
    )
    use_rslora: bool = Field(
        False,
        title="Use rsLoRA",
        description="Rank-stabilised LoRA scaling (alpha / sqrt(r)).",
        json_schema_extra=in_section("lora"),
    )
