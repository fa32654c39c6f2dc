"""A quick look at a local file for the UI: its detected layout and first rows as parsed, each cell
cut to ``PREVIEW_CHARS`` characters (``preview``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import datasets
import pandas as pd

from trainer_core.data.files import DatasetError, read_file, read_head, rows_dataset
from trainer_core.data.formats import apply_mapping, detect_format, message_lines, normalize
from trainer_core.data.preference import canonical_preference
from trainer_core.data.prompts import canonical_prompts
from trainer_core.data.tool_rows import TOOLS
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType, TrainingMethod

PREVIEW_CHARS = 300  # characters per preview cell


def preview(
    path: str,
    rows: int = 5,
    format_type: FormatType = FormatType.auto,
    mapping: Optional[dict[str, str]] = None,
    method: TrainingMethod = TrainingMethod.sft,
) -> tuple[FormatType, pd.DataFrame]:
    """The detected (or given) layout of a local file and its first ``rows`` rows as parsed, for
    the UI: columns ``row`` (1-based) and ``conversation`` ("role: content" lines) or ``text``
    (for a preference ``method``: ``prompt`` and the answers, see ``_preference_preview``), each
    cell cut to ~300 characters. Reads only the start of the file where it can.
    Raises DatasetError like ``load_conversations``."""
    name = Path(path).name
    head = read_head(path, rows)
    try:
        dataset = rows_dataset(head)
    except DatasetError:  # values arrow cannot hold together: the full reader names them
        dataset = read_file(path).select(range(min(rows, len(head))))
    if mapping:
        dataset = apply_mapping(dataset, mapping, name)
    if method == TrainingMethod.grpo:
        from trainer_core.data.inspect import sample_frame

        return FormatType.prompt_only, sample_frame(canonical_prompts(dataset, name))
    if method != TrainingMethod.sft:
        return _preference_preview(dataset, format_type, method, name)
    fmt = detect_format(dataset.column_names, name) if format_type == FormatType.auto else format_type
    canonical = normalize(dataset, fmt, name)
    if "text" in canonical.column_names:
        cells = [_cut(text) for text in canonical["text"]]
        column = "text"
    else:
        cells = [message_lines(m, PREVIEW_CHARS, t) for m, t in zip(canonical["messages"], canonical[TOOLS])]
        column = "conversation"
    return fmt, pd.DataFrame({"row": range(1, len(cells) + 1), column: cells})


def _preference_preview(
    dataset: datasets.Dataset, format_type: FormatType, method: TrainingMethod, name: str
) -> tuple[FormatType, pd.DataFrame]:
    """Preview rows of preference data: ``row``, ``prompt`` and ``chosen`` / ``rejected`` (pairs) or
    ``completion`` / ``label`` (KTO rows; pairs are shown unpaired, two rows per pair)."""
    request = TrainingStartRequest.model_construct(training_method=method, format_type=format_type)
    canonical, fmt = canonical_preference(dataset, request, name)
    table = {
        "row": list(range(1, len(canonical) + 1)),
        "prompt": [message_lines(m, PREVIEW_CHARS) for m in canonical["prompt"]],
    }
    for column in ("chosen", "rejected", "completion"):
        if column in canonical.column_names:
            table[column] = [message_lines(m, PREVIEW_CHARS) for m in canonical[column]]
    if "label" in canonical.column_names:
        table["label"] = ["desirable" if label else "undesirable" for label in canonical["label"]]
    return fmt, pd.DataFrame(table)


def _cut(text: str) -> str:
    """``text`` cut to PREVIEW_CHARS characters (with an ellipsis)."""
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


__all__ = ["PREVIEW_CHARS", "preview"]
