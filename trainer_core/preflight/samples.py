"""Sample rows as training sees them: the token ids after truncation, decoded in runs of trained
(labelled) and masked tokens, so a reader sees exactly what the loss is computed on."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from trainer_core.data.tokenization import IGNORE
from trainer_core.preflight.report import SampleRow, Segment

SAMPLES = 3


def segments(input_ids: Sequence[int], labels: Sequence[int], tokenizer: Any) -> list[Segment]:
    """``input_ids`` decoded in maximal runs of trained (label != -100) or masked tokens; special
    tokens kept, no clean-up of spaces, so the texts joined are the decoded row."""
    out = []
    position = 0
    for trained, run in groupby(label != IGNORE for label in labels):
        size = len(list(run))
        ids = list(input_ids[position : position + size])
        position += size
        out.append(
            Segment(
                text=tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False),
                trained=trained,
            )
        )
    return out


def pick_samples(sources: Sequence[int], truncated: Sequence[bool], count: int = SAMPLES) -> list[int]:
    """Indices of ``count`` kept rows to show: the first row of each source, then the first
    truncated row, then the following rows in order. ``sources[i]``: source index of kept row i."""
    chosen: list[int] = []
    firsts = {source: i for i, source in reversed(list(enumerate(sources)))}
    candidates = [
        *sorted(firsts.values()),
        next((i for i, cut in enumerate(truncated) if cut), None),
        *range(len(sources)),
    ]
    for index in candidates:
        if index is not None and index not in chosen and len(chosen) < count:
            chosen.append(index)
    return sorted(chosen)


def sample_row(row: dict, name: str, tokenizer: Any, max_seq_length: int) -> SampleRow:
    """One row of ``encode_rows``' output (with ``_row``, its 1-based row in file ``name``)."""
    labels = row["labels"]
    return SampleRow(
        file=name,
        row=int(row["_row"]),
        tokens=len(row["input_ids"]),
        trained_tokens=sum(label != IGNORE for label in labels),
        truncated=row["full_length"] > max_seq_length,
        segments=segments(row["input_ids"], labels, tokenizer),
    )


__all__ = ["SAMPLES", "pick_samples", "sample_row", "segments"]
