"""The values of an embedding run's rows, checked as training reads them: each text one non-empty
string, each score a finite number within the loss's range (``SCORE_RANGES``), each label one
value; labelled texts grouped (two labels with two texts each) and numbered. Every refusal names
the row (counted from 1 in its source) and the column."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError
from trainer_core.vocabulary import EmbeddingLoss

SCORE_RANGES = {  # the scores a loss can fit; a loss not named reads any finite score (CoSENT ranks them)
    EmbeddingLoss.CosineSimilarityLoss: (-1.0, 1.0),  # fits the two texts' cosine to the score
}


def _refuse(source: str, message: str, code: str) -> DatasetError:
    return DatasetError(f"{source}: {message}", fields=("local_datasets", "embedding_columns"), code=code)


def checked_values(
    dataset: datasets.Dataset, texts: tuple[str, ...], source: str, loss: Optional[EmbeddingLoss] = None
) -> datasets.Dataset:
    """``dataset`` (already in a shape's columns, ``texts`` those that hold texts) with its texts as
    strings and its scores (column ``score``) as float32. Raises DatasetError naming the column and
    the row (counted from 1 in ``source``) where a text is missing, empty or a list / object, a score
    is not a finite number or lies outside ``loss``'s ``SCORE_RANGES``, or a label (column
    ``label``) is missing or not one value."""
    order = dataset.column_names
    for column in texts:
        values = [_scalar(value, row, column, source) for row, value in enumerate(dataset[column], 1)]
        if not isinstance(dataset.features[column], datasets.Value) or dataset.features[column].dtype != "string":
            dataset = dataset.remove_columns(column).add_column(column, [str(value) for value in values])
    if "score" in order:
        for row, score in enumerate(dataset["score"], 1):
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise _refuse(
                    source,
                    f"row {row}: score {score!r} is not a number: give each pair a finite similarity score "
                    "(e.g. 0.0 to 1.0)",
                    "embedding_score_not_number",
                )
            _in_range(score, row, loss, source)
        dataset = dataset.cast_column("score", datasets.Value("float32"))
    if "label" in order:
        for row, label in enumerate(dataset["label"], 1):
            _scalar(label, row, "label", source)
    return dataset.select_columns(order)


def _in_range(score: float, row: int, loss: Optional[EmbeddingLoss], source: str) -> None:
    """Raise DatasetError naming ``row`` when ``score`` lies outside ``loss``'s ``SCORE_RANGES``."""
    if loss not in SCORE_RANGES:
        return
    low, high = SCORE_RANGES[loss]
    if not low <= score <= high:
        raise DatasetError(
            f"{source}: row {row}: score {score:g} is outside {loss.value}'s range {low:g} to {high:g} (it fits "
            "the two texts' cosine to the score): rescale the scores (e.g. 0 to 5 ratings divided by 5), or choose "
            f"{EmbeddingLoss.CoSENTLoss.value}, which reads scores of any scale",
            fields=("local_datasets", "embedding_loss"),
            code="embedding_score_out_of_range",
        )


def _scalar(value: Any, row: int, column: str, source: str) -> Any:
    """``value`` when it is one text / number; raises DatasetError naming ``row`` and ``column``
    when it is missing, an empty text, a list or an object."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _refuse(
            source,
            f"row {row}: column {column} is empty: every row needs it (remove the row or fill it in)",
            "embedding_value_missing",
        )
    if not isinstance(value, (str, int, float, bool)):
        raise _refuse(
            source,
            f"row {row}: column {column} holds a {type(value).__name__}, not one text or value: give one a row, or map "
            "another column with embedding_columns",
            "embedding_value_not_text",
        )
    return value


def grouped_labels(rows: datasets.Dataset, what: str, fields: tuple[str, ...]) -> None:
    """Raise DatasetError (``fields``) unless 2 or more labels have 2 or more of ``rows`` each: the
    batch-triplet losses' ``group_by_label`` batches need a positive and a negative for each text."""
    counts = Counter(rows["label"])
    grouped = sum(1 for n in counts.values() if n >= 2)
    if grouped < 2:
        raise DatasetError(
            f"{what} ({len(rows)}) hold {len(counts)} labels, {grouped} of them on 2 or more rows: labelled texts "
            "train in batches grouped by label, which need at least 2 labels with 2 or more texts each; add rows "
            "(or, for the held-out rows, raise val_size)",
            fields=fields,
            code="embedding_labels_too_few",
        )


def label_ids(*splits: Optional[datasets.Dataset]) -> list[Optional[datasets.Dataset]]:
    """Labelled ``splits`` with each ``label`` as a whole-number class id (one numbering across the
    splits, in order of first appearance) where any label is not one already; the losses stack
    labels into a tensor, which strings, floats or mixed types cannot make. Others as they are."""
    present = [s for s in splits if s is not None]
    if all(getattr(s.features["label"], "dtype", "").startswith(("int", "uint")) for s in present):
        return list(splits)
    ids: dict[Any, int] = {}
    out = []
    for split in splits:
        if split is not None:
            numbered = [ids.setdefault(label, len(ids)) for label in split["label"]]
            split = split.remove_columns("label").add_column("label", numbered)
        out.append(split)
    return out
