"""Text cut into chunks of a set number of tokens with an overlap, each chunk an exact slice of the
text (token offsets), so a quote the model copies from a chunk can be found in it again."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from trainer_core.recipes.errors import RecipeError
from trainer_core.request.model import DEFAULT_MODEL


class Chunking(BaseModel):
    """How documents are cut: sizes in tokens of ``tokenizer`` (the one place of their defaults)."""

    model_config = {"extra": "forbid"}

    chunk_tokens: int = Field(512, ge=16, le=32_768, description="Tokens in one chunk (the last may be shorter).")
    overlap_tokens: int = Field(64, ge=0, description="Tokens a chunk shares with the one before it.")
    tokenizer: str = Field(
        DEFAULT_MODEL,
        description="Model (Hub id or folder on this machine) whose tokenizer counts the tokens; nothing is downloaded.",
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Chunking:
        if self.overlap_tokens >= self.chunk_tokens:
            raise RecipeError(
                f"chunking.overlap_tokens ({self.overlap_tokens}) must be below chunking.chunk_tokens "
                f"({self.chunk_tokens})",
                fields=("overlap_tokens", "chunk_tokens"),
            )
        return self


def chunk_text(text: str, tokenizer: Any, chunk_tokens: int, overlap_tokens: int) -> list[str]:
    """``text`` as chunks of at most ``chunk_tokens`` tokens, each starting ``chunk_tokens -
    overlap_tokens`` tokens after the one before; each chunk is ``text[start:end]`` of its tokens'
    character offsets, stripped. Blank text gives no chunks."""
    if overlap_tokens >= chunk_tokens:
        raise ValueError("overlap_tokens must be below chunk_tokens")
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    offsets = [(start, end) for start, end in offsets if end > start]
    chunks: list[str] = []
    step = chunk_tokens - overlap_tokens
    for first in range(0, len(offsets), step):
        window = offsets[first : first + chunk_tokens]
        piece = text[window[0][0] : window[-1][1]].strip()
        if piece:
            chunks.append(piece)
        if first + chunk_tokens >= len(offsets):
            break
    return chunks
