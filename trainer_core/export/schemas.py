"""Export requests and results (API bodies, CLI, Runs tab). Field metadata lives here once."""

from __future__ import annotations

from typing import Any, Literal, Optional, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

# GGUF file types, as llama.cpp's quantizer names them (lower case): f16 / bf16 / q8_0 are written by
# the converter; q6_k, q5_k_m, q4_k_m and q4_0 by llama.cpp's quantizer from the f16 file.
GGUFType = Literal["f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"]
GGUF_TYPES: tuple[str, ...] = get_args(GGUFType)
QUANTISED: tuple[str, ...] = ("q6_k", "q5_k_m", "q4_k_m", "q4_0")  # need llama.cpp's quantizer
ExportFormat = Literal[
    "adapter", "merged", "gguf-f16", "gguf-bf16", "gguf-q8_0", "gguf-q6_k", "gguf-q5_k_m", "gguf-q4_k_m", "gguf-q4_0"
]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
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
        description="adapter: zip of the LoRA adapter, tokenizer and card; merged: adapter merged into the base, "
        "safetensors; gguf-*: a llama.cpp file made from the merged model (q4_k_m: what Ollama and LM Studio "
        "download by default; q5_k_m, q6_k, q8_0: larger and closer to the run; f16 / bf16: unquantised).",
    )
    dtype: MergeDtype = Field("float16", description="Weights dtype of a merged export (GGUF sets its own).")
    gguf_types: list[GGUFType] = Field(
        default_factory=list,
        max_length=len(GGUF_TYPES),
        description="More GGUF formats written in the same task (one conversion, then each quantisation; each "
        "file checked). Only with a gguf-* format.",
    )

    @field_validator("gguf_types", mode="before")
    @classmethod
    def _each_type_once(cls, value: Any) -> Any:
        """A type ticked twice is one file (before the count is checked)."""
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(dict.fromkeys(value))
        return value

    @model_validator(mode="after")
    def _gguf_types_need_gguf(self) -> ExportRequest:
        if self.gguf_types and not self.format.startswith("gguf-"):
            raise ValueError(f"gguf_types: more GGUF formats need a gguf-* format, not {self.format!r}")
        return self

    def gguf_list(self) -> list[str]:
        """The GGUF types to write: the format's, then ``gguf_types`` (each once, in that order)."""
        if not self.format.startswith("gguf-"):
            return []
        return list(dict.fromkeys([self.format.removeprefix("gguf-"), *self.gguf_types]))


class CheckResult(BaseModel):
    """Greedy answers of the exported model to fixed prompts, compared token by token with the
    adapter model's (the run as trained); for GGUF also its chat template and EOS token."""

    passed: bool
    summary: str = Field(description='e.g. "f16: 3/3 prompts, 60/60 tokens equal"')
    checked_by: str = Field("", description="What ran the exported model: llama.cpp, transformers or metadata only.")
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
    cosine_min: Optional[float] = Field(
        None,
        description="An embedding model's export: the lowest cosine similarity between the exported model's "
        "vector and the run's for the check sentences (1.0: the same direction).",
    )
    first_difference: list[Optional[int]] = Field(
        default_factory=list,
        description="Per prompt: the 0-based position of the first token that differs (None: all equal).",
    )


class ExportedFile(BaseModel):
    """One file of an export, relative to the task's folder."""

    name: str
    size_bytes: int


class GGUFFile(BaseModel):
    """One GGUF file of an export and its checks."""

    name: str
    type: str = Field(description="The requested type, e.g. q4_k_m.")
    file_type: str = Field("", description="general.file_type in the file's header, e.g. MOSTLY_Q4_K_M.")
    size_bytes: int = 0
    check: Optional[CheckResult] = Field(None, description="The file run in llama.cpp (else transformers).")
    second_opinion: Optional[CheckResult] = Field(
        None,
        description="The file loaded back by transformers' GGUF reader, where it reads the format: shown beside "
        "llama.cpp's check, never what passes or fails the export.",
    )


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
    gguf: list[GGUFFile] = Field(default_factory=list, description="Each GGUF file written, with its checks.")


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
