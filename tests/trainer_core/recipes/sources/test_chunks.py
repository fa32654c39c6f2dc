"""Chunks by tokens with overlap: sizes, the overlap shared, each chunk a slice of the text, and the
settings' bounds."""

from __future__ import annotations

import pytest

from trainer_core.recipes.sources.chunks import Chunking, chunk_text


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_chunks_have_the_size_and_share_the_overlap(tokenizer):
    text = " ".join(f"word{i}." for i in range(300))
    chunks = chunk_text(text, tokenizer, chunk_tokens=64, overlap_tokens=16)
    sizes = [len(_ids(tokenizer, c)) for c in chunks]
    assert all(abs(s - 64) <= 1 for s in sizes[:-1]) and 0 < sizes[-1] <= 65
    assert all(c in text for c in chunks)  # exact slices: a quote from a chunk is in the text
    for before, after in zip(chunks, chunks[1:]):
        shared = before[-20:]  # the overlap (16 tokens) covers more than 20 characters here
        assert shared.strip() in after
    assert " ".join(text.split()[-3:]) in chunks[-1]  # nothing lost at the end


def test_no_overlap_tiles_the_text_and_blank_text_gives_nothing(tokenizer):
    text = "alpha beta gamma delta " * 40
    chunks = chunk_text(text, tokenizer, chunk_tokens=32, overlap_tokens=0)
    assert sum(len(_ids(tokenizer, c)) for c in chunks) == pytest.approx(len(_ids(tokenizer, text)), abs=len(chunks))
    assert chunk_text("   \n ", tokenizer, 32, 0) == []
    assert chunk_text("short text", tokenizer, 32, 8) == ["short text"]


def test_chunking_settings_have_bounds_and_one_default_place():
    assert (Chunking().chunk_tokens, Chunking().overlap_tokens) == (512, 64)
    with pytest.raises(ValueError, match=r"overlap_tokens \(64\) must be below chunking.chunk_tokens \(64\)"):
        Chunking(chunk_tokens=64, overlap_tokens=64)
    with pytest.raises(ValueError):
        Chunking(chunk_tokens=4)
