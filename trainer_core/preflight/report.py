"""The pre-flight report: what a run would train on and what it would cost, before it starts.

One JSON document (``PreflightReport.model_dump_json()``) for the API, ``check --json`` and the UI;
every key says what it counts (rows, tokens, steps, GiB, seconds).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field


class Issue(BaseModel):
    """One warning or error: what is wrong and the fix, naming request fields by their request name
    (the UI maps names to labels)."""

    level: Literal["error", "warning"]
    code: str = Field(
        description="Stable id, e.g. no_trained_tokens, rows_truncated, eval_too_small, "
        "learning_rate_unusual, memory_over_free, run_too_short."
    )
    message: str
    fields: list[str] = Field(default_factory=list, description="Request field names involved.")


class FileCheck(BaseModel):
    """One data file (or Hub split) as read: its detected layout, rows read / kept / dropped and
    why rows were dropped (``drop_reasons``: reason code -> rows)."""

    name: str
    split: Literal["train", "eval"]
    format: str
    rows_read: int
    rows_kept: int
    rows_dropped: int
    drop_reasons: dict[str, int] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list, description="Notices from reading, e.g. numbers turned into text.")


class Segment(BaseModel):
    """A run of rendered text whose tokens are all trained (labelled) or all masked."""

    text: str
    trained: bool


class SampleRow(BaseModel):
    """One training row exactly as training sees it (after truncation): ``tokens`` kept,
    ``trained_tokens`` of them labelled, ``truncated`` when tokens were cut; ``row`` is 1-based in
    ``file``."""

    file: str
    row: int
    tokens: int
    trained_tokens: int
    truncated: bool
    segments: list[Segment]


class LengthHistogram(BaseModel):
    """Token lengths of the training rows before truncation: ``counts[i]`` rows have a length in
    ``[edges[i], edges[i+1])`` (the last bin includes its right edge); len(edges) == len(counts) + 1."""

    edges: list[int] = Field(default_factory=list)
    counts: list[int] = Field(default_factory=list)


class SampleEstimate(BaseModel):
    """Where a report's row, token, step, time and memory figures are estimates from a sample of
    the training files (``preflight.sampled``): ``basis`` says "estimated from N of M rows";
    ``margins`` maps a report field to the half-width of its 95 % interval (same unit as the
    field); ``full_pass_id`` names the exact check that follows (poll it where the report came from)."""

    rows_sampled: int
    rows_total: int
    basis: str
    margins: dict[str, float] = Field(default_factory=dict)
    full_pass_id: Optional[str] = None


try:  # helper module with the memory / time models; absent only while it is being written
    from trainer_core.preflight.estimates import MemoryEstimate, TimeEstimate
except ModuleNotFoundError as exc:  # pragma: no cover - a partial import (a cycle) still raises
    if exc.name != "trainer_core.preflight.estimates":
        raise
    MemoryEstimate = TimeEstimate = dict[str, Any]  # type: ignore[misc]


class PreflightReport(BaseModel):
    """Everything the pre-flight check found. Row and token counts are over the training rows
    (after ``dataset_slice_*`` and the ``val_size`` split); ``eval_rows`` counts evaluation rows
    kept. Token-based numbers are 0 (estimates None) when ``tokenizer_found`` is False.
    ``memory_estimate_gib`` / ``time_estimate_seconds`` are the totals of ``memory`` / ``time``.
    ``check_seconds``: wall time of the check."""

    model_name: str
    tokenizer_found: bool
    max_seq_length: int
    files: list[FileCheck]
    rows_read: int
    rows_kept: int
    rows_dropped: int
    rows_truncated: int
    rows_truncated_share: float
    tokens_total: int
    tokens_trained: int
    tokens_cut: int
    rows_without_trained_tokens: int
    eval_rows: int
    histogram: LengthHistogram
    samples: list[SampleRow]
    global_batch_size: int
    steps_per_epoch: int
    total_steps: int
    epochs: float
    memory_estimate_gib: Optional[float] = None
    memory: Optional[MemoryEstimate] = None
    time_estimate_seconds: Optional[float] = None
    time: Optional[TimeEstimate] = None
    no_estimates: Optional[str] = Field(
        None, description='Why memory and time are not estimated, when they are not ("the data could not be read").'
    )
    warnings: list[Issue] = Field(default_factory=list)
    errors: list[Issue] = Field(default_factory=list)
    check_seconds: float = 0.0
    estimate: Optional[SampleEstimate] = Field(
        None, description="Set when the figures are estimated from a sample; None when they are exact."
    )
    architecture: Optional[str] = Field(None, description="The model's class, e.g. Phi3ForCausalLM.")
    attention: Optional[str] = Field(None, description="The attention implementation training uses.")
    adapted_modules: Optional[str] = Field(
        None, description="What LoRA adapts: the projections per block and the block count."
    )
    adapted_count: int = Field(0, description="LoRA layers in the whole model (0 for full fine-tuning).")
    vision: Optional[str] = Field(
        None,
        description="A vision-language model: its family, the image size and what the first rows' images cost in "
        "tokens (counted with its processor).",
    )
    audio: Optional[str] = Field(
        None,
        description="Audio data: its clips, their total and longest duration, the sampling rates of the files and "
        "the one they are read at, clips over max_audio_seconds, and is_dataset_audio (found from the data or set).",
    )
    method: Optional[str] = Field(
        None, description="GRPO: completions sampled per step, their length, the rewards and the KL weight."
    )
    tools: Optional[str] = Field(
        None,
        description="Tool use in the training rows: rows with functions, the functions, calls per row, and whether "
        "the chat template renders tools natively or the fallback block is used (``data.tool_rows``).",
    )
    precision: Optional[str] = Field(
        None,
        description='The precision training will use and why (``models.precision``), e.g. "bf16 mixed precision: '
        'bf16 matmul 410 vs fp32 198 GFLOP/s on this CPU (avx512_bf16)".',
    )

    def trained_words(self) -> str:
        """What the token line says is trained: "N trained", or for GRPO (``method`` set), whose
        trained tokens are the completions sampled while it trains, that the counts are the prompts'."""
        if self.method:
            return f"all in {self.rows_kept} prompts (the completions sampled while training are what trains)"
        return f"{self.tokens_trained} trained"

    def epochs_words(self) -> str:
        """The epochs run as the report says them: one decimal ("1.3"; whole numbers bare: "3"),
        two significant digits under one ("0.043")."""
        return f"{self.epochs:.2g}" if self.epochs < 1 else f"{round(self.epochs, 1):g}"


__all__ = ["FileCheck", "Issue", "LengthHistogram", "PreflightReport", "SampleEstimate", "SampleRow", "Segment"]
