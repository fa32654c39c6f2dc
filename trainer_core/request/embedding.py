"""Embedding models: whether the run trains an embedder, and its loss, columns, Matryoshka sizes and
query prompt (fields the form shows only for an embedding model; the model's kind is
``kinds.embedding``)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, field_validator

from trainer_core.request.base import FieldGroup, in_section
from trainer_core.request.mappings import read_text
from trainer_core.vocabulary import EMBEDDING_ROLES, EmbeddingLoss, OptionalWholeNumber, WholeNumber

MAX_MATRYOSHKA_DIMS = 16


class EmbeddingFields(FieldGroup):
    """The embedding fields: ``is_embedding`` in section ``model`` (every model may be trained as
    one), the rest in section ``embedding`` (``embedding`` in their metadata: shown for embedders)."""

    is_embedding: Optional[bool] = Field(
        None,
        title="Train as an embedding model",
        description=(
            "Empty: found from the model (a sentence-transformers folder, with modules.json, is an embedding model). "
            "On: the model is trained to embed text for search and RAG (a text model gets last-token pooling, as "
            "Qwen3-Embedding); the data is pairs, triplets, scored pairs or labelled texts. Off: a text generator."
        ),
        json_schema_extra=in_section("model"),
    )
    embedding_loss: Optional[EmbeddingLoss] = Field(
        None,
        title="Embedding loss",
        description=(
            "Empty: chosen from the data's columns: anchor / positive (and negatives) train with "
            "MultipleNegativesRankingLoss (the other rows of a batch are the negatives), sentence1 / sentence2 / score "
            "with CoSENTLoss, text / label with BatchSemiHardTripletLoss. CachedMultipleNegativesRankingLoss gives "
            "large batches on small memory (see mini_batch_size)."
        ),
        json_schema_extra=in_section("embedding", embedding=True),
    )
    embedding_columns: Optional[dict[str, str]] = Field(
        None,
        title="Embedding columns",
        description=(
            "Which data column plays which part, e.g. anchor=instruction, positive=output; parts: "
            + ", ".join(EMBEDDING_ROLES)
            + ". Empty: the columns named as sentence-transformers names them (query / document read as anchor / positive)."
        ),
        json_schema_extra=in_section("embedding", embedding=True),
    )
    matryoshka_dims: Optional[list[WholeNumber]] = Field(
        None,
        title="Matryoshka dimensions",
        description=(
            "Train the embedding so that its first N values work alone, for each N listed (e.g. 768, 512, 256, 128, 64: "
            "MatryoshkaLoss around the loss); /v1/embeddings' dimensions then cuts vectors to these sizes. Empty: off."
        ),
        json_schema_extra=in_section("embedding", embedding=True),
    )
    query_prompt: Optional[str] = Field(
        None,
        max_length=1000,
        title="Query prompt",
        description=(
            'Text put before each query (the anchor) in training and search, e.g. "Instruct: Given a question, '
            'retrieve passages that answer it\\nQuery: " for Qwen3-Embedding-style models. Empty: none.'
        ),
        json_schema_extra=in_section("embedding", embedding=True),
    )
    mini_batch_size: OptionalWholeNumber = Field(
        None,
        ge=1,
        le=4096,
        title="Mini-batch size",
        description=(
            "CachedMultipleNegativesRankingLoss: rows embedded at once inside a batch (memory), while the batch "
            "(batch_size) still gives every row its in-batch negatives. Empty: 32."
        ),
        json_schema_extra=in_section("embedding", embedding=True),
    )

    @field_validator("embedding_columns", mode="before")
    @classmethod
    def _embedding_columns_text(cls, value: Any) -> Any:
        """The text forms (``a=b, c=d``, ``a -> b``, a JSON object) read as the form reads them."""
        return read_text(value, "embedding_columns")

    @field_validator("embedding_columns")
    @classmethod
    def _known_roles(cls, value: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
        """Every key a known part (``EMBEDDING_ROLES``), every column named once."""
        if not value:
            return None
        unknown = sorted(set(value) - set(EMBEDDING_ROLES))
        if unknown:
            raise ValueError(f"unknown part {', '.join(unknown)}: use {', '.join(EMBEDDING_ROLES)}")
        columns = [c.strip() for c in value.values()]
        if any(not c for c in columns) or len(set(columns)) != len(columns):
            raise ValueError("name each column once, none blank")
        return {role: column.strip() for role, column in value.items()}

    @field_validator("matryoshka_dims")
    @classmethod
    def _dims(cls, value: Optional[list[int]]) -> Optional[list[int]]:
        """Positive, distinct sizes, at most ``MAX_MATRYOSHKA_DIMS``, sorted largest first (as
        sentence-transformers' MatryoshkaLoss lists them)."""
        if not value:
            return None
        if len(value) > MAX_MATRYOSHKA_DIMS or any(d < 1 for d in value) or len(set(value)) != len(value):
            raise ValueError(f"give 1 to {MAX_MATRYOSHKA_DIMS} distinct sizes above 0, e.g. 256, 128, 64")
        return sorted(value, reverse=True)
