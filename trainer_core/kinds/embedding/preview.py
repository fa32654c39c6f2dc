"""An embedding run's dataset preview (``ModelKind.preview_rows``): the first rows of a file read as
training reads them (``data.embedding_rows``: the columns as sentence-transformers names them or as
``embedding_columns`` maps them, the shape, each bad value refused by row and column), the loss
training chooses for that shape (``losses.chosen_loss``), and each row's longest text in tokens by
the embedder's tokenizer, cut where training cuts it (``data.cut_length``)."""

from __future__ import annotations

from typing import Any

from trainer_core.data.preview_cells import KindRows
from trainer_core.kinds.embedding.check import check_method
from trainer_core.kinds.embedding.data import cut_length, embedding_rows, text_lengths
from trainer_core.kinds.embedding.losses import COLUMNS, chosen_loss


def preview_rows(dataset: Any, request: Any, tokenizer: Any, source: str) -> KindRows:
    """The preview of ``dataset`` (a ``datasets.Dataset``: the first rows of ``source`` as read) for
    an embedding run of ``request`` (its ``training_method``, ``embedding_columns``,
    ``embedding_loss``, ``max_seq_length``); ``tokenizer``: the embedder's, or None (no token
    counts). Layout e.g. "embedding triplets: anchor / positive / negative —
    MultipleNegativesRankingLoss". Raises Refusal for a generation method or a loss that does not fit
    the columns; DatasetError for generation data, a mapped column the file lacks, or a bad row."""
    check_method(request)
    rows, shape = embedding_rows(dataset, request.embedding_columns, source, request.embedding_loss)
    loss = chosen_loss(request, shape)
    layout = f"embedding {shape.value}: {COLUMNS[shape]} — {loss.value}"
    if tokenizer is None:
        return KindRows(layout=layout, rows=rows, lengths=None, max_seq_length=request.max_seq_length)
    limit = cut_length(request.max_seq_length, tokenizer)
    lengths = [max(texts) for texts in zip(*text_lengths(rows, shape, tokenizer))]  # (rows,)
    notes = []
    if limit < request.max_seq_length:
        notes.append(
            f"Texts are cut at the model's own limit of {limit} tokens, below Max seq length "
            f"({request.max_seq_length}): rows are counted against {limit}."
        )
    return KindRows(layout=layout, rows=rows, lengths=lengths, max_seq_length=limit, notes=notes)
