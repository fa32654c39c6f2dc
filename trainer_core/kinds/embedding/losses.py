"""An embedding run's loss: chosen from the data's shape or asked for (``embedding_loss``), checked
against the columns, wrapped in ``MatryoshkaLoss`` for ``matryoshka_dims``, and the batch sampler
it wants (no duplicates where the other rows of a batch are the negatives)."""

from __future__ import annotations

from typing import Any

from trainer_core.kinds.embedding.data import Shape
from trainer_core.refusals import Refusal
from trainer_core.vocabulary import EmbeddingLoss

DEFAULT = {
    Shape.pairs: EmbeddingLoss.MultipleNegativesRankingLoss,
    Shape.triplets: EmbeddingLoss.MultipleNegativesRankingLoss,
    Shape.scored: EmbeddingLoss.CoSENTLoss,
    Shape.labelled: EmbeddingLoss.BatchSemiHardTripletLoss,
}
IN_BATCH = (EmbeddingLoss.MultipleNegativesRankingLoss, EmbeddingLoss.CachedMultipleNegativesRankingLoss)
FITS = {  # the shapes each loss reads
    EmbeddingLoss.MultipleNegativesRankingLoss: (Shape.pairs, Shape.triplets),
    EmbeddingLoss.CachedMultipleNegativesRankingLoss: (Shape.pairs, Shape.triplets),
    EmbeddingLoss.CoSENTLoss: (Shape.scored,),
    EmbeddingLoss.CosineSimilarityLoss: (Shape.scored,),
    EmbeddingLoss.BatchSemiHardTripletLoss: (Shape.labelled,),
    EmbeddingLoss.BatchAllTripletLoss: (Shape.labelled,),
}
COLUMNS = {
    Shape.pairs: "anchor / positive",
    Shape.triplets: "anchor / positive / negative",
    Shape.scored: "sentence1 / sentence2 / score",
    Shape.labelled: "text / label",
}
MINI_BATCH_SIZE = 32  # CachedMultipleNegativesRankingLoss's own default (mini_batch_size's "Empty: 32")


def chosen_loss(request: Any, shape: Shape) -> EmbeddingLoss:
    """The loss ``request`` trains rows of ``shape`` with: its ``embedding_loss``, else ``DEFAULT``.
    Raises Refusal (field ``embedding_loss``) when the loss cannot read such rows."""
    loss = request.embedding_loss or DEFAULT[shape]
    if shape not in FITS[loss]:
        fitting = ", ".join(name.value for name, shapes in FITS.items() if shape in shapes)
        raise Refusal(
            f"embedding_loss {loss.value} does not fit the data's {COLUMNS[shape]} columns: choose {fitting} "
            "(or leave it empty to choose from the columns)",
            fields=("embedding_loss",),
            code="embedding_loss_mismatch",
        )
    return loss


def check_dims(request: Any, dimension: int) -> None:
    """Raise Refusal (field ``matryoshka_dims``) when a size is above the model's ``dimension``."""
    above = [d for d in request.matryoshka_dims or () if d > dimension]
    if above:
        raise Refusal(
            f"matryoshka_dims {', '.join(map(str, above))} exceed the model's embedding size {dimension}: "
            f"use sizes up to {dimension}, e.g. {dimension}, {dimension // 2}, {dimension // 4}",
            fields=("matryoshka_dims",),
            code="matryoshka_dims_too_large",
        )


def build_loss(request: Any, model: Any, shape: Shape) -> Any:
    """sentence-transformers' loss module for ``request`` on ``model`` (a ``SentenceTransformer``)
    and rows of ``shape``; ``MatryoshkaLoss`` around it with ``matryoshka_dims``. Raises Refusal."""
    from sentence_transformers.sentence_transformer import losses

    name = chosen_loss(request, shape)
    if name == EmbeddingLoss.CachedMultipleNegativesRankingLoss:
        loss = losses.CachedMultipleNegativesRankingLoss(
            model, mini_batch_size=request.mini_batch_size or MINI_BATCH_SIZE
        )
    else:
        loss = getattr(losses, name.value)(model)
    if request.matryoshka_dims:
        check_dims(request, model.get_embedding_dimension())
        loss = losses.MatryoshkaLoss(model, loss, matryoshka_dims=list(request.matryoshka_dims))
    return loss


def batch_sampler(loss: EmbeddingLoss) -> str:
    """sentence-transformers' ``BatchSamplers`` value for ``loss``: ``no_duplicates`` where the other
    rows of a batch are the negatives (a duplicate text would be a false negative),
    ``group_by_label`` for the batch-triplet losses (each batch needs two texts of a label)."""
    if loss in IN_BATCH:
        return "no_duplicates"
    if loss in (EmbeddingLoss.BatchSemiHardTripletLoss, EmbeddingLoss.BatchAllTripletLoss):
        return "group_by_label"
    return "batch_sampler"
