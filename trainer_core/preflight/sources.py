"""The request's data read source by source (each file, then the Hub split) through
``data.prepare.load_conversations``, so the check can say per file what was read and kept.

Each source is read with a copy of the request naming only that source and the part of
``dataset_slice_start:dataset_slice_end`` that falls in it, so the rows are those training reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.data.files import read_file, reading_notes
from trainer_core.data.prepare import load_conversations
from trainer_core.schemas import TrainingStartRequest

ONLY_THIS = {
    "local_datasets": [],
    "local_eval_datasets": [],
    "hf_dataset": None,
    "val_size": 0.0,
    "dataset_slice_start": 0,
    "dataset_slice_end": 0,
}


@dataclass
class Source:
    """One source's rows in canonical form (``messages`` or ``text``); ``first_row`` is the 1-based
    row number in the file of ``rows[0]``; ``split`` is "train" or "eval"."""

    name: str
    split: str
    format: str
    rows: datasets.Dataset
    first_row: int = 1
    notes: list[str] = field(default_factory=list)


def _notes(path: Optional[str], request: TrainingStartRequest, wanted: bool) -> list[str]:
    """Reading notices for a local file or folder (``data.files.reading_notes``: e.g. numbers turned
    into text, folder files left out); none for the Hub split or when not ``wanted``. That function
    reads the file once more (about 1 s for 1,000 Alpaca rows)."""
    if path is None or not wanted:
        return []
    return list(
        reading_notes(path, request.format_type, request.custom_format_mapping or None, request.training_method)
    )


def _train_windows(request: TrainingStartRequest) -> list[tuple[Optional[str], int, int]]:
    """(path or None for the Hub split, first row, row after the last; 0-based) per training source
    in reading order: whole sources without a slice, else the part of the slice in each (sources
    the slice misses are left out). Reads each source once more to count its rows when sliced.
    Raises DatasetError when the slice reaches beyond the data (``check_slice``), as training does."""
    paths: list[Optional[str]] = [
        *request.local_datasets,
        *([None] if request.hf_dataset and request.train_split else []),
    ]
    start, end = request.dataset_slice_start, request.dataset_slice_end
    if start == 0 and end == 0:
        return [(path, 0, 0) for path in paths]
    sizes = [
        len(read_file(path)) if path is not None else len(load_conversations(_only(request, None))[0]) for path in paths
    ]
    check_slice(start, end or None, sum(sizes))
    windows, offset = [], 0
    for path, size in zip(paths, sizes):
        lo, hi = max(start - offset, 0), size if end == 0 else min(end - offset, size)
        if lo < hi:
            windows.append((path, lo, hi))
        offset += size
    return windows


def check_slice(start: int, end: Optional[int], total: int) -> None:
    """Raise DatasetError, in ``data.prepare._slice``'s words, when rows ``[start, end)`` (0-based;
    ``end`` None: to the end) reach beyond ``total`` rows, as training refuses them: a start at or
    past the last row, or an end past it."""
    if start >= total or (end is not None and end > total):
        raise DatasetError(
            f"dataset_slice_start={start}, dataset_slice_end={end} reaches beyond the training data, which has {total} rows: "
            f"use a start below {total} and an end of at most {total} (or empty)",
            fields=("dataset_slice_start", "dataset_slice_end"),
        )


def _only(
    request: TrainingStartRequest, path: Optional[str], lo: int = 0, hi: int = 0, eval: bool = False
) -> TrainingStartRequest:
    """A copy of ``request`` whose only data is ``path`` (None: the Hub split), rows [lo, hi)."""
    updates = dict(ONLY_THIS, dataset_slice_start=lo, dataset_slice_end=hi)
    if path is not None:
        updates["local_eval_datasets" if eval else "local_datasets"] = [path]
    else:
        updates["hf_dataset"] = request.hf_dataset
    return request.model_copy(update=updates)


def read_train_sources(request: TrainingStartRequest, notes: bool = True) -> list[Source]:
    """The training sources, sliced as training slices them (with their reading notes when
    ``notes``). Raises DatasetError (a file that
    cannot be read or a row that cannot be used, naming file and row; a slice beyond the data;
    raw text mixed with conversations, in ``load_conversations``' words)."""
    sources = []
    for path, lo, hi in _train_windows(request):
        rows, fmt = load_conversations(_only(request, path, lo, hi))
        name = Path(path).name if path is not None else f"{request.hf_dataset} [{request.train_split}]"
        sources.append(Source(name, "train", fmt.value, rows, lo + 1, _notes(path, request, notes)))
    if not sources or len({frozenset(s.rows.column_names) for s in sources}) > 1:
        load_conversations(request)  # raises the slice or mixed-data error in the data layer's words
    return sources


def read_eval_sources(request: TrainingStartRequest, notes: bool = True) -> list[Source]:
    """The evaluation files (or the Hub eval split when there are none); [] without them (a
    ``val_size`` split is made from the training rows by the caller). Raises DatasetError."""
    paths: list[Optional[str]] = list(request.local_eval_datasets)
    if not paths and request.hf_dataset and request.eval_split:
        paths = [None]
    sources = []
    for path in paths:
        rows, fmt = load_conversations(_only(request, path, eval=True), eval=True)
        name = Path(path).name if path is not None else f"{request.hf_dataset} [{request.eval_split}]"
        sources.append(Source(name, "eval", fmt.value, rows, 1, _notes(path, request, notes)))
    return sources


__all__ = ["Source", "check_slice", "read_eval_sources", "read_train_sources"]
