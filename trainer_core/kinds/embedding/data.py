"""An embedding run's data: the request's sources read as for text (``data.prepare.raw_sources``:
JSON / JSONL / CSV / Parquet / a Hub split), their columns named as sentence-transformers names
them (or mapped with ``embedding_columns``), their values checked (``values``), one shape for the
run, the ``val_size`` split, and token counts of the texts.

Shapes (sentence-transformers' column names, in the order its trainer reads them): ``pairs``
(anchor, positive), ``triplets`` (anchor, positive, negative[, negative_1...]), ``scored``
(sentence1, sentence2, score) and ``labelled`` (text, label). ``query`` / ``document`` read as
anchor / positive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.data.prepare import has_eval_data, raw_sources, split_validation
from trainer_core.kinds.embedding.values import checked_values, grouped_labels, label_ids
from trainer_core.request.mappings import mapping_text
from trainer_core.vocabulary import EmbeddingLoss

ALIASES = {"query": "anchor", "document": "positive"}  # the other names sentence-transformers' docs use
GENERATION = (  # columns of a text generator's data, and the mapping a refusal suggests for them
    (("instruction", "output"), mapping_text({"anchor": "instruction", "positive": "output"})),
    (("prompt", "completion"), mapping_text({"anchor": "prompt", "positive": "completion"})),
    (("messages",), None),
    (("conversations",), None),
    (("chosen", "rejected"), None),
)


class Shape(str, Enum):
    """The layout of an embedding run's rows (sentence-transformers' column names)."""

    pairs = "pairs"
    triplets = "triplets"
    scored = "scored"
    labelled = "labelled"


TEXT_COLUMNS = {Shape.scored: ("sentence1", "sentence2"), Shape.labelled: ("text",)}


@dataclass
class EmbeddingStats:
    """Token counts of one split's texts: ``rows``; ``total_tokens`` (= ``trained_tokens``: every
    token of a text is embedded) after each text is cut at ``max_seq_length``; ``truncated_rows``
    (rows with a text longer than ``max_seq_length`` tokens) and ``truncated_tokens`` (the tokens
    cut off, all texts); ``longest_tokens`` (before the cut); ``duplicate_anchors`` /
    ``duplicate_positives`` (rows whose anchor / positive another row has too: false in-batch negatives)."""

    rows: int
    total_tokens: int
    trained_tokens: int
    truncated_rows: int
    max_seq_length: int
    truncated_tokens: int = 0
    longest_tokens: int = 0
    duplicate_anchors: int = 0
    duplicate_positives: int = 0


@dataclass
class EmbeddingData:
    """The prepared splits (sentence-transformers' columns) with their shape and token counts; the
    attributes the worker reads of ``data.prepared.PreparedData`` (``format`` is the ``Shape``).
    ``sources`` / ``eval_sources``: (name, rows read) of each file or split, in order (the rows
    joined in that order before any ``val_size`` split); ``row_lengths``: each training row's
    longest text in tokens, before the cut."""

    train: datasets.Dataset
    eval: Optional[datasets.Dataset]
    format: Shape
    stats: EmbeddingStats
    eval_stats: Optional[EmbeddingStats]
    system_message: Optional[str] = None
    sources: list[tuple[str, int]] = field(default_factory=list)
    eval_sources: list[tuple[str, int]] = field(default_factory=list)
    row_lengths: list[int] = field(default_factory=list)


def text_columns(shape: Shape, columns: list[str]) -> tuple[str, ...]:
    """The columns of ``shape`` that hold texts (the embedded ones), in order."""
    return TEXT_COLUMNS.get(shape, tuple(columns))


def _shape(columns: list[str], source: str, mapped: bool) -> Shape:
    """The shape ``columns`` (already renamed) make; raises DatasetError saying what they are."""
    names = set(columns)
    if {"anchor", "positive"} <= names:
        return Shape.triplets if any(c.startswith("negative") for c in names) else Shape.pairs
    if {"sentence1", "sentence2", "score"} <= names:
        return Shape.scored
    if {"text", "label"} <= names:
        return Shape.labelled
    for needed, mapping in GENERATION:
        if set(needed) <= names and not mapped:
            how = f" (e.g. {mapping})" if mapping else " into anchor / positive columns"
            raise DatasetError(
                f"{source} is a text generator's data (columns {', '.join(needed)}), not embedding pairs: an embedding "
                f"model learns from (anchor, positive) pairs, scored sentence pairs or labelled texts. Map its "
                f"columns with embedding_columns{how}, or pick a text model and turn is_embedding off",
                fields=("embedding_columns", "is_embedding"),
                code="generation_data_for_embedding",
            )
    raise DatasetError(
        f"{source}: columns {', '.join(columns)} make no embedding data: give anchor / positive (and negative) "
        "columns, query / document, sentence1 / sentence2 / score, or text / label, or map yours with "
        'embedding_columns (e.g. {"anchor": "question", "positive": "answer"})',
        fields=("embedding_columns",),
        code="no_embedding_columns",
    )


def embedding_rows(
    dataset: datasets.Dataset,
    columns: Optional[dict[str, str]],
    source: str,
    loss: Optional[EmbeddingLoss] = None,
) -> tuple[Any, Shape]:
    """(``dataset`` with only its embedding columns, renamed and ordered as sentence-transformers
    reads them; its ``Shape``). ``columns``: the request's ``embedding_columns`` (part -> column);
    ``loss``: its ``embedding_loss`` (scores outside its ``values.SCORE_RANGES`` refused). Raises
    DatasetError naming a mapped column ``source`` lacks, columns that make no shape, or the row and
    column of a bad value (``checked_values``)."""
    if columns:
        missing = [column for column in columns.values() if column not in dataset.column_names]
        if missing:
            raise DatasetError(
                f"{source} has no column {', '.join(missing)} (embedding_columns); its columns: "
                + ", ".join(dataset.column_names),
                fields=("embedding_columns",),
                code="embedding_column_missing",
            )
        dataset = dataset.select_columns(list(columns.values())).rename_columns({v: k for k, v in columns.items()})
    else:
        aliases = {old: new for old, new in ALIASES.items() if old in dataset.column_names}
        if aliases and not set(aliases.values()) & set(dataset.column_names):
            dataset = dataset.rename_columns(aliases)
    shape = _shape(dataset.column_names, source, bool(columns))
    if shape in (Shape.pairs, Shape.triplets):
        negatives = sorted(c for c in dataset.column_names if c.startswith("negative"))
        order = ["anchor", "positive", *negatives]
    else:
        order = [*TEXT_COLUMNS[shape], "score" if shape == Shape.scored else "label"]
    return checked_values(dataset.select_columns(order), text_columns(shape, order), source, loss), shape


def _read(request: Any, eval: bool, sizes: Optional[list] = None) -> tuple[datasets.Dataset, Shape]:
    """The request's training (or evaluation) rows joined (``sizes``, when given, gets each source's
    (name, rows)); raises DatasetError when sources differ."""
    parts = [
        (name, *embedding_rows(rows, request.embedding_columns, name, request.embedding_loss))
        for name, rows in raw_sources(request, eval)
    ]
    first_name, first, shape = parts[0]
    if sizes is not None:
        sizes.extend((name, len(rows)) for name, rows, _ in parts)
    for name, rows, other in parts[1:]:
        if other != shape or rows.column_names != first.column_names:
            raise DatasetError(
                f"{first_name} holds {shape.value} ({', '.join(first.column_names)}) but {name} holds {other.value} "
                f"({', '.join(rows.column_names)}): give them the same columns, or train on them in separate runs",
                fields=("embedding_columns",),
            )
    if len(parts) == 1:
        return first, shape
    return datasets.concatenate_datasets([rows for _, rows, _ in parts]), shape


def held_out_rows(request: Any) -> tuple[datasets.Dataset, Shape]:
    """(the evaluation rows ``prepare_embedding_data`` gives ``request``: its ``val_size`` split of
    the training rows, else its evaluation files / Hub split; with neither, its training rows (files
    given to evaluate on); their shape). Raises DatasetError."""
    if request.val_size > 0:
        rows, shape = _read(request, eval=False)
        return split_validation(rows, request)[1], shape
    return _read(request, eval=has_eval_data(request))


def cut_length(max_seq_length: int, tokenizer: Any) -> int:
    """The tokens a text is cut at when embedded: ``max_seq_length``, or the tokenizer's own limit
    (``model_max_length``) where lower."""
    return min(max_seq_length, getattr(tokenizer, "model_max_length", None) or max_seq_length)


def text_lengths(rows: datasets.Dataset, shape: Shape, tokenizer: Any) -> list[list[int]]:
    """Tokens of each text (with the tokenizer's special tokens), one list a text column."""
    return [
        [
            len(ids)
            for ids in tokenizer([str(t) for t in rows[column]], add_special_tokens=True, verbose=False)["input_ids"]
        ]
        for column in text_columns(shape, rows.column_names)
    ]


def count_tokens(
    rows: datasets.Dataset, shape: Shape, tokenizer: Any, max_seq_length: int, lengths: Optional[list] = None
) -> EmbeddingStats:
    """Token counts of ``rows``' texts by ``tokenizer`` (with its special tokens); ``lengths``: their
    ``text_lengths`` when already counted."""
    lengths = text_lengths(rows, shape, tokenizer) if lengths is None else lengths
    per_row = list(zip(*lengths)) or [()]
    cut = sum(max(n - max_seq_length, 0) for row in per_row for n in row)
    total = sum(sum(row) for row in per_row) - cut
    duplicates = {}
    for role in ("anchor", "positive"):
        if role in rows.column_names:
            values = rows[role]
            duplicates[role] = len(values) - len(set(values))
    return EmbeddingStats(
        rows=len(rows),
        total_tokens=total,
        trained_tokens=total,
        truncated_rows=sum(1 for row in per_row if row and max(row) > max_seq_length),
        max_seq_length=max_seq_length,
        truncated_tokens=cut,
        longest_tokens=max((max(row) for row in per_row if row), default=0),
        duplicate_anchors=duplicates.get("anchor", 0),
        duplicate_positives=duplicates.get("positive", 0),
    )


def prepare_embedding_data(request: Any, tokenizer: Any) -> EmbeddingData:
    """The request's embedding rows: training rows, the evaluation rows (its ``val_size`` split of
    the training rows, or its evaluation files / Hub split), their shape and token counts (texts
    longer than ``max_seq_length``, or the tokenizer's own limit where lower, are cut by the model
    when embedded). Raises DatasetError."""
    sources: list[tuple[str, int]] = []
    eval_sources: list[tuple[str, int]] = []
    train, shape = _read(request, eval=False, sizes=sources)
    evaluation = None
    if request.val_size > 0:
        train, evaluation = split_validation(train, request)
    elif has_eval_data(request):
        evaluation, eval_shape = _read(request, eval=True, sizes=eval_sources)
        if eval_shape != shape:
            raise DatasetError(
                f"the evaluation data holds {eval_shape.value} but the training data {shape.value}: give both the "
                "same columns",
                fields=("local_eval_datasets", "eval_split"),
            )
    if shape == Shape.labelled:
        train, evaluation = label_ids(train, evaluation)
        grouped_labels(train, "the training rows", ("local_datasets", "embedding_columns"))
        if evaluation is not None:
            grouped_labels(evaluation, "the held-out rows", ("val_size", "local_eval_datasets"))
    length = cut_length(request.max_seq_length, tokenizer)
    lengths = text_lengths(train, shape, tokenizer)
    return EmbeddingData(
        train=train,
        eval=evaluation,
        format=shape,
        stats=count_tokens(train, shape, tokenizer, length, lengths),
        eval_stats=count_tokens(evaluation, shape, tokenizer, length) if evaluation is not None else None,
        sources=sources,
        eval_sources=eval_sources,
        row_lengths=[max(row) for row in zip(*lengths)],
    )
