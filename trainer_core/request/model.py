"""The model to train and how its weights train: the model's name, the training type (LoRA, QLoRA,
full), remote code, 4-bit loading, the sequence length and the Hugging Face token."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, SecretStr

from trainer_core.request.base import FieldGroup, in_section
from trainer_core.vocabulary import TrainingType, WholeNumber

DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"


class ModelFields(FieldGroup):
    """The model group's fields (section ``model``); ``use_lora`` is the seed API's switch, not on the
    form (``rules.use_lora_agrees`` maps it onto ``training_type``)."""

    model_name: str = Field(
        DEFAULT_MODEL,
        min_length=1,
        max_length=1024,
        description="Hub model id (owner/name) or the absolute path of a model folder in an allowed folder.",
        json_schema_extra=in_section("model"),
    )
    training_type: TrainingType = Field(
        TrainingType.lora,
        description="lora: train adapters; qlora: adapters on a 4-bit base; full: all weights.",
        json_schema_extra=in_section("model"),
    )
    trust_remote_code: bool = Field(
        False,
        title="Trust remote code",
        description=(
            "Run the Python code a model ships (its config.json auto_map) to build it; only for code you trust. "
            "The server must allow it (STUDIO_ALLOW_REMOTE_CODE=1)."
        ),
        json_schema_extra=in_section("model"),
    )
    use_lora: Optional[bool] = Field(
        None,
        title="Use LoRA",
        description=(
            "The seed API's switch, accepted as it sends it: true means training_type lora (or qlora), "
            "false means full. When given with training_type the two must agree; alone, false selects full."
        ),
        json_schema_extra=in_section("model", form=False),
    )
    load_in_4bit: bool = Field(
        False,
        title="Load in 4-bit",
        description="Load the base model in 4-bit NF4 (bitsandbytes). Only with training_type=qlora, which turns it on.",
        json_schema_extra=in_section("model"),
    )
    max_seq_length: WholeNumber = Field(
        512,
        ge=16,
        le=32768,
        description="Longest training sequence in tokens; longer rows are truncated (and counted).",
        json_schema_extra=in_section("model"),
    )
    hf_token: Optional[SecretStr] = Field(
        None,
        max_length=512,
        title="Hugging Face token",
        description="Hugging Face token for gated or private models and datasets. Never logged or stored.",
        json_schema_extra=in_section("model"),
    )
