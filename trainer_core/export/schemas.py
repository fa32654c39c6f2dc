"""Export requests and results (API bodies, CLI, Runs tab). Field metadata lives here once."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ExportFormat = Literal["adapter", "merged", "gguf-f16", "gguf-q8_0"]
EXPORT_FORMATS: tuple[str, ...] = ("adapter", "merged", "gguf-f16", "gguf-q8_0")
MergeDtype = Literal["float16", "bfloat16", "float32"]
MAX_ID_CHARS = 200


class ExportRequest(BaseModel):
    """Export one run's weights. ``model`` is a run's job id (its final weights) or
    ``JOB_ID/checkpoint-N``."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Run or checkpoint to export: a job id or JOB_ID/checkpoint-N.",
    )
    format: ExportFormat = Field(
        "adapter",
        description="adapter: zip of the LoRA adapter, tokenizer and card; merged: adapter merged into the base, safetensors; gguf-f16 / gguf-q8_0: llama.cpp file made from the merged model.",
    )
    dtype: MergeDtype = Field("float16", description="Weights dtype of a merged export (GGUF sets its own).")


class CheckResult(BaseModel):
    """Greedy answers of the exported model to fixed prompts, compared token by token with the
    adapter model's (the run as trained); for GGUF also its chat template and EOS token."""

    passed: bool
    summary: str = Field(description='e.g. "f16: 3/3 prompts, 60/60 tokens equal"')
    prompts_equal: int = 0
    prompts_total: int = 0
    tokens_equal: int = 0
    tokens_total: int = 0
    required: str = Field("", description="What the check accepts for this format, e.g. all tokens equal.")
    chat_template_ok: Optional[bool] = None
    eos_ok: Optional[bool] = None
    problems: list[str] = Field(default_factory=list)
    forced_tokens_equal: int = Field(
        0,
        description="Next-token predictions equal to the adapter model's when both read its answers (teacher-forced).",
    )
    near_ties: list[str] = Field(
        default_factory=list,
        description="Differences explained by rounding: where the adapter model's top two tokens were nearly tied.",
    )
    samples: list[dict[str, str]] = Field(
        default_factory=list,
        description="Per prompt: the prompt and both models' answers as text (prompt, adapter, exported).",
    )
    first_difference: list[Optional[int]] = Field(
        default_factory=list,
        description="Per prompt: the 0-based position of the first token that differs (None: all equal).",
    )


class ExportedFile(BaseModel):
    """One file of an export, relative to the task's folder."""

    name: str
    size_bytes: int


class ExportResult(BaseModel):
    """What an export wrote and how its check went. ``passed`` False = files kept but marked failed."""

    format: ExportFormat
    dtype: Optional[str] = None
    files: list[ExportedFile] = Field(default_factory=list)
    size_bytes: int = 0
    check: Optional[CheckResult] = None
    passed: bool = True
    seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)
    stage_seconds: dict[str, float] = Field(
        default_factory=dict, description="Wall seconds per stage (load, reference, merge, save, convert, check, card)."
    )


class PushRequest(BaseModel):
    """Push a finished export to the Hugging Face Hub. The token is used for this push only: never
    stored or logged (``HF_TOKEN`` from the environment when not given)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="The export task whose files are pushed.")
    repo_id: str = Field(min_length=3, max_length=96, description="Hub repository, owner/name.")
    private: bool = Field(True, description="Create the repository as private.")
    token: Optional[SecretStr] = Field(None, max_length=400, description="Hub token with write access (else HF_TOKEN).")


class PushResult(BaseModel):
    """Where the files went."""

    repo_id: str
    url: str
    private: bool
    files: list[str] = Field(default_factory=list)
