"""The data façade: request -> canonical rows per split (tokenized splits are ``data.prepared``,
a file's preview ``data.preview``).

Reading is in ``files`` (folders in ``folders``), layouts in ``formats``, rendering and loss masks in
``tokenization``. ``reading_notes`` (from ``files``) says what reading a file changed: numbers and
true/false turned into text, folder files left out.
Each source (file or Hub split) is detected and normalised on its own, then the sources are joined,
so one request may mix, say, an Alpaca file and a ShareGPT file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import datasets

from trainer_core.data.files import DatasetError, read_parts, reading_notes
from trainer_core.data.formats import apply_mapping, detect_format, normalize
from trainer_core.data.hub_data import read_hub
from trainer_core.data.images import base_folder
from trainer_core.data.local_kind import request_kind
from trainer_core.data.preference import canonical_preference
from trainer_core.data.prompts import canonical_prompts
from trainer_core.model_kind import ModelKind, joined_media, media_keeper
from trainer_core.request.rules import NO_TRAINING_DATA
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType, TrainingMethod

log = logging.getLogger(__name__)
__all__ = [
    "check_local_data",
    "eval_conversations",
    "has_eval_data",
    "load_conversations",
    "raw_sources",
    "source_parts",
    "reading_notes",
    "split_validation",
]


def has_eval_data(request: TrainingStartRequest) -> bool:
    """True when the request names evaluation files, a Hub evaluation split or a ``val_size`` split."""
    return bool(request.local_eval_datasets or (request.hf_dataset and request.eval_split) or request.val_size > 0)


def split_validation(
    rows: datasets.Dataset, request: TrainingStartRequest
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """(train, eval) rows: ``rows.train_test_split(test_size=val_size, seed=random_seed)`` (eval gets
    ceil(val_size x rows) rows, shuffled by a generator seeded with ``random_seed``), so the same
    rows and request always give the same split. Raises DatasetError when no training row is left."""
    try:
        parts = rows.train_test_split(test_size=request.val_size, seed=request.random_seed, keep_in_memory=True)
    except ValueError as exc:
        raise DatasetError(
            f"val_size={request.val_size} cannot split {len(rows)} training rows ({exc}): "
            "give more rows or set val_size to 0",
            fields=("val_size",),
        ) from None
    log.info(
        "val_size %.3f: %d training rows, %d held out for evaluation (seed %d)",
        request.val_size,
        len(parts["train"]),
        len(parts["test"]),
        request.random_seed,
    )
    return parts["train"], parts["test"]


def eval_conversations(request: TrainingStartRequest) -> datasets.Dataset:
    """The request's evaluation rows in canonical form, as its training run used them: its eval files
    or Hub split, or its ``val_size`` split of the training rows (rebuilt: the same files, slice and
    seed give the same rows). Raises DatasetError, also when the request has no evaluation data."""
    if request.val_size > 0:
        return split_validation(load_conversations(request)[0], request)[1]
    return load_conversations(request, eval=True)[0]


def _sources(request: TrainingStartRequest, eval: bool) -> list[tuple[str, datasets.Dataset, Optional[Path]]]:
    """(name, raw dataset, folder its relative image paths are read from) for each file (each data
    file of a folder), then the Hub split (no folder); the token stays out of names."""
    files = request.local_eval_datasets if eval else request.local_datasets
    split = request.eval_split if eval else request.train_split
    sources = [(*part, base_folder(path)) for path in files for part in read_parts(path)]
    if request.hf_dataset and split and (not eval or not files):
        token = request.hf_token.get_secret_value() if request.hf_token else None
        hub_rows = read_hub(request.hf_dataset, request.subset, split, token)
        sources.append((f"{request.hf_dataset} [{split}]", hub_rows, None))
    if not sources:
        raise DatasetError(
            "no evaluation data: give local_eval_datasets or an eval_split"
            if eval
            else f"{NO_TRAINING_DATA}: give local_datasets or hf_dataset",
            fields=("local_eval_datasets", "eval_split") if eval else ("local_datasets", "hf_dataset"),
        )
    return sources


def _slice(
    sources: list[tuple[str, datasets.Dataset, Optional[Path]]], start: int, end: Optional[int]
) -> list[tuple[str, datasets.Dataset, int, Optional[Path]]]:
    """Rows ``[start, end)`` of the sources taken as one sequence, as (name, rows, first file row
    number, image folder). Raises DatasetError when the slice reaches beyond the data."""
    total = sum(len(dataset) for _, dataset, _ in sources)
    if start >= total or (end is not None and end > total):
        raise DatasetError(
            f"dataset_slice_start={start}, dataset_slice_end={end} reaches beyond the training data, which has {total} rows: "
            f"use a start below {total} and an end of at most {total} (or empty)",
            fields=("dataset_slice_start", "dataset_slice_end"),
        )
    end = total if end is None else end
    out, offset = [], 0
    for name, dataset, base in sources:
        lo, hi = max(start - offset, 0), min(end - offset, len(dataset))
        if lo < hi:
            rows = dataset if (lo, hi) == (0, len(dataset)) else dataset.select(range(lo, hi))
            out.append((name, rows, lo + 1, base))
        offset += len(dataset)
    return out


def raw_sources(request: TrainingStartRequest, eval: bool = False) -> list[tuple[str, datasets.Dataset]]:
    """(name, raw rows as read) of each training source cut to ``dataset_slice_start:dataset_slice_end``
    (with ``eval``: each evaluation source whole), for a kind that reads its own columns (an
    embedding model's pairs). Raises DatasetError as ``load_conversations`` does."""
    return [(name, dataset) for name, dataset, _, _ in source_parts(request, eval)]


def source_parts(
    request: TrainingStartRequest, eval: bool = False
) -> list[tuple[str, datasets.Dataset, int, Optional[Path]]]:
    """(name, raw rows, file row number of the first, folder its relative media paths are read from)
    of each training source cut to the slice (with ``eval``: each evaluation source whole). Raises
    DatasetError as ``load_conversations`` does."""
    sources = _sources(request, eval)
    if eval:
        return [(name, dataset, 1, base) for name, dataset, base in sources]
    return _slice(sources, request.dataset_slice_start, request.dataset_slice_end or None)


def _canonical(
    name: str,
    dataset: datasets.Dataset,
    request: TrainingStartRequest,
    first_row: int,
    base: Optional[Path] = None,
    kind: Optional[ModelKind] = None,
) -> tuple[datasets.Dataset, FormatType]:
    """One source mapped, detected (unless the request fixes the format) and normalised; rows with
    media that a kind keeps for the request's model of ``kind`` (``model_kind.media_keeper``: images
    for a vision-language model) keep them (``ModelKind.media_rows``, relative paths read from
    ``base``)."""
    if request.custom_format_mapping:
        dataset = apply_mapping(dataset, request.custom_format_mapping, name)
    if request.training_method == TrainingMethod.grpo:
        return canonical_prompts(dataset, name, first_row), FormatType.prompt_only
    if request.training_method != TrainingMethod.sft:
        return canonical_preference(dataset, request, name, first_row)
    fmt = detect_format(dataset.column_names, name) if request.format_type == FormatType.auto else request.format_type
    if fmt == FormatType.prompt_only:
        raise DatasetError(
            "format_type 'prompt_only' is prompts without answers: choose training_method grpo to learn from "
            "rewards (or another format_type for SFT)",
            fields=("format_type", "training_method"),
        )
    if fmt in (FormatType.preference, FormatType.unpaired):
        raise DatasetError(
            f"format_type {fmt.value!r} is preference data: choose training_method dpo, orpo or kto "
            "(or another format_type for SFT)",
            fields=("format_type", "training_method"),
        )
    log.info("%s: format %s, %d rows", name, fmt.value, len(dataset))
    keeper = media_keeper(request, dataset, kind or request_kind(request))
    if keeper is not None:
        return keeper.media_rows(dataset, fmt, name, base, first_row)[0], fmt
    return normalize(dataset, fmt, name, first_row=first_row), fmt


def load_conversations(
    request: TrainingStartRequest, eval: bool = False, kind: Optional[ModelKind] = None
) -> tuple[datasets.Dataset, FormatType]:
    """The request's training (or, with ``eval``, evaluation) rows in canonical form (column
    ``messages`` or ``text``) and the layout of the first source. The training rows are cut to
    ``dataset_slice_start:dataset_slice_end`` across all sources taken in order.

    ``kind``: the model's kind (the worker knows it once the model is loaded); None: found from the
    model's config where it is on this machine (``data.local_kind.request_kind``). Rows with images
    for a vision model keep them (column ``images``, ``ModelKind.media_rows``).

    Raises DatasetError for anything wrong with the data (see ``datafiles`` and ``formats``), a
    slice beyond the data, or sources that mix raw text with conversations.
    """
    normalised = [
        (name, *_canonical(name, dataset, request, first_row, base, kind))
        for name, dataset, first_row, base in source_parts(request, eval)
    ]
    normalised = joined_media(normalised, request)
    first_name, first, first_fmt = normalised[0]
    for name, dataset, _ in normalised[1:]:
        _check_joinable(first_name, first.column_names, name, dataset.column_names)
    if len(normalised) == 1:
        return first, first_fmt
    return datasets.concatenate_datasets([dataset for _, dataset, _ in normalised]), first_fmt


ROW_KINDS = (
    ("chosen", "preference pairs (chosen / rejected)"),
    ("label", "unpaired preference rows (completion / label)"),
    ("prompt", "prompts"),
    ("messages", "conversations"),
    ("text", "raw text"),
)  # a canonical column that tells what a source's rows are, and their name


def row_kind(columns: list[str]) -> str:
    """What canonical rows with ``columns`` are, in words ("conversations", "raw text", "prompts"...)."""
    return next((kind for column, kind in ROW_KINDS if column in columns), "rows of columns " + ", ".join(columns))


def _check_joinable(first_name: str, first: list[str], name: str, columns: list[str]) -> None:
    """Raise DatasetError when two normalised sources cannot be joined: they hold different kinds of
    rows, or (the same kind) different columns, e.g. a GRPO reward column only one of them has.
    The order of the columns does not matter."""
    if set(columns) == set(first):
        return
    ours, theirs = row_kind(first), row_kind(columns)
    if ours != theirs:
        raise DatasetError(
            f"{first_name} holds {ours} but {name} holds {theirs}: train on them in separate runs "
            "(or remove the file you did not mean from the data)"
        )
    only = [(sorted(set(a) - set(b)), where) for a, b, where in ((first, columns, first_name), (columns, first, name))]
    differ = "; ".join(f"{', '.join(names)} only in {where}" for names, where in only if names)
    raise DatasetError(
        f"{first_name} and {name} hold {ours} with different columns ({differ}): give both files the same "
        "columns (map them with custom_format_mapping), or train on them in separate runs",
        fields=("custom_format_mapping",),
    )


def check_local_data(request: TrainingStartRequest) -> None:
    """Read and normalise the request's local files now (well under a second for files of a few MB),
    so a bad file is reported at Start instead of after the worker has loaded the model. Hub data is
    left to the worker. Raises DatasetError."""
    if request.hf_dataset:
        return
    rows, _ = load_conversations(request)
    if request.val_size > 0:
        split_validation(rows, request)
    if request.local_eval_datasets:
        load_conversations(request, eval=True)
