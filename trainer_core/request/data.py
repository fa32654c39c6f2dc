"""The training and evaluation data: a Hub dataset or files on the server, their layout and chat
template, the column mapping, the Hub parts (subset, splits), the held-out share and the row slice."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, field_validator

from trainer_core.hub_ids import hub_id_problem
from trainer_core.refusals import Refusal
from trainer_core.request.base import (
    MAX_FILES,
    MAX_NAME_CHARS,
    FieldGroup,
    NameText,
    PathText,
    blank_is_none,
    in_section,
)
from trainer_core.request.mappings import read_text
from trainer_core.vocabulary import DefaultTemplate, FormatType, WholeNumber


class DataFields(FieldGroup):
    """The data group's fields (section ``data``)."""

    hf_dataset: Optional[str] = Field(
        None,
        max_length=200,
        title="Hub dataset",
        description="Hub dataset id, e.g. tatsu-lab/alpaca (files on the server go in local_datasets).",
        json_schema_extra=in_section("data"),
    )
    local_datasets: list[PathText] = Field(
        default_factory=list,
        max_length=MAX_FILES,
        description="Training files (.json, .jsonl, .csv, .parquet, .txt).",
        json_schema_extra=in_section("data"),
    )
    local_eval_datasets: list[PathText] = Field(
        default_factory=list,
        max_length=MAX_FILES,
        description="Evaluation files, same formats as the training files.",
        json_schema_extra=in_section("data"),
    )
    format_type: FormatType = Field(
        FormatType.auto,
        description="Dataset layout; auto detects it from the columns.",
        json_schema_extra=in_section("data"),
    )
    default_chat_template: DefaultTemplate = Field(
        "auto",
        title="Chat template for models without one",
        description="How conversations are written for a model that ships no chat template (base models; a model with its own always keeps it). auto: ChatML when the tokenizer has <|im_start|> / <|im_end|> tokens, else zephyr (<|user|> ... eos), which stops where the model's eos stops. chatml, zephyr or alpaca (### Instruction / ### Response) by name. The check shows the one used; the run saves it with its tokenizer.",
        json_schema_extra=in_section("data"),
    )
    custom_format_mapping: dict[NameText, NameText] = Field(
        default_factory=dict,
        max_length=32,
        description="Our column name = the file's column, e.g. instruction=question, output=answer; instruction -> question and a JSON object read the same.",
        json_schema_extra=in_section("data"),
    )
    subset: Optional[str] = Field(
        None,
        max_length=MAX_NAME_CHARS,
        description="Hub dataset configuration (subset) name.",
        json_schema_extra=in_section("data"),
    )
    train_split: str = Field(
        "train",
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="The Hub dataset's split used for training (local files are read whole).",
        json_schema_extra=in_section("data"),
    )
    eval_split: Optional[str] = Field(
        None,
        max_length=MAX_NAME_CHARS,
        description="Hub split used for evaluation (none: no evaluation unless eval files or val_size are given).",
        json_schema_extra=in_section("data"),
    )
    val_size: float = Field(
        0.0,
        ge=0,
        le=0.5,
        title="Validation fraction (val_size)",
        description="Share of the training rows held out as the evaluation set (0..0.5; 0: none), split with random_seed so evaluation can rebuild it. Not together with eval files or eval_split.",
        json_schema_extra=in_section("data"),
    )
    eval_steps: WholeNumber = Field(
        50,
        ge=1,
        le=1_000_000,
        description="Evaluate every this many optimizer steps (when there is evaluation data).",
        json_schema_extra=in_section("data"),
    )
    dataset_slice_start: WholeNumber = Field(
        0, ge=0, description="First training row to use (0-based).", json_schema_extra=in_section("data")
    )
    dataset_slice_end: WholeNumber = Field(
        0,
        ge=0,
        description="Row after the last one to use (exclusive); 0: to the end.",
        json_schema_extra=in_section("data"),
    )

    @field_validator("custom_format_mapping", mode="before")
    @classmethod
    def _column_mapping_text(cls, value: Any) -> Any:
        """The text forms (``a=b, c=d``, ``a -> b``, a JSON object) read as the form reads them."""
        return read_text(value, "custom_format_mapping")

    @field_validator("subset", "eval_split")
    @classmethod
    def _blank_hub_parts(cls, value: Optional[str]) -> Optional[str]:
        return blank_is_none(value)

    @field_validator("hf_dataset")
    @classmethod
    def _hub_dataset_id(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and value.strip() and (problem := hub_id_problem(value.strip())):
            raise Refusal(
                f"'{value[:80]}' {problem}; files on the server go in local_datasets", fields=("local_datasets",)
            )
        return value.strip() if value and value.strip() else None
