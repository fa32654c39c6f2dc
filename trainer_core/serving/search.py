"""Search with an embedding model: one query against a list of passages, ranked by cosine
similarity, and (``compare``) the same ranking by the run's base model beside it. The page's Search
tab and the share page's search use it (the share page through ``/v1/embeddings``, the same sums).

The run's ``query_prompt`` (``ModelChoice.query_prompt``) is put before the query, as training and
its evaluation did; passages are embedded as they are. Bounds: 1 to ``MAX_SEARCH_PASSAGES``
passages of at most ``MAX_EMBEDDING_INPUT_CHARS`` characters each, as ``/v1/embeddings`` takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol

import numpy as np

from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import MAX_EMBEDDING_INPUT_CHARS, Embeddings, ModelChoice

MAX_SEARCH_PASSAGES = 1000  # passages in one search (the query goes in the same embeddings request)


class Embedder(Protocol):
    """What a search needs of the chat engine (``ChatEngine``)."""

    def resolve(self, model_id: str) -> ModelChoice: ...

    def embed(
        self, model_id: str, texts: list[str], dimensions: Optional[int] = None, use_adapter: bool = True
    ) -> Embeddings: ...


@dataclass
class Ranking:
    """One model's answer: ``scores`` (P,) the cosine of each passage (in the order given) with the
    query, in [-1, 1]; ``order`` the passages' indices, best first; ``ranks`` (P,) each passage's
    place in ``order``, 1 = best."""

    scores: Any
    order: list[int]
    ranks: list[int]


@dataclass
class SearchResult:
    """``tuned``: the chosen model's ranking; ``base``: its base model's (None unless compared);
    ``query_prompt``: the text put before the query (None: none)."""

    tuned: Ranking
    base: Optional[Ranking]
    query_prompt: Optional[str]


def ranking(query_vector: Any, passage_vectors: Any) -> Ranking:
    """The ranking of ``passage_vectors`` (P, D) by cosine with ``query_vector`` (D,); ties keep
    the passages' order."""
    query = np.asarray(query_vector, dtype=np.float64)
    passages = np.asarray(passage_vectors, dtype=np.float64)
    norms = np.linalg.norm(passages, axis=1) * np.linalg.norm(query)
    scores = np.clip(passages @ query / np.where(norms > 0, norms, 1.0), -1.0, 1.0)  # (P,)
    order = [int(i) for i in np.argsort(-scores, kind="stable")]
    ranks = [0] * len(order)
    for place, index in enumerate(order, start=1):
        ranks[index] = place
    return Ranking(scores=scores, order=order, ranks=ranks)


def checked_passages(passages: Any) -> list[str]:
    """``passages`` as a list of texts; ChatInputError naming ``passages`` (and the passage, counted
    from 1) unless there are 1 to ``MAX_SEARCH_PASSAGES``, each a non-empty text of at most
    ``MAX_EMBEDDING_INPUT_CHARS`` characters."""
    if not isinstance(passages, list) or not passages:
        raise ChatInputError("passages: give at least one passage to rank (one a line)", fields=("passages",))
    if len(passages) > MAX_SEARCH_PASSAGES:
        raise ChatInputError(
            f"passages: at most {MAX_SEARCH_PASSAGES} passages in one search, not {len(passages):,}; search fewer",
            fields=("passages",),
            code="too_many_passages",
        )
    for number, text in enumerate(passages, start=1):
        if not isinstance(text, str) or not text.strip():
            raise ChatInputError(f"passages: passage {number} is empty; give a text", fields=("passages",))
        if len(text) > MAX_EMBEDDING_INPUT_CHARS:
            raise ChatInputError(
                f"passages: passage {number} has {len(text):,} characters; at most {MAX_EMBEDDING_INPUT_CHARS:,}",
                fields=("passages",),
            )
    return passages


def checked(engine: Embedder, model_id: str, query: Any, passages: Any, compare: bool = False) -> ModelChoice:
    """The embedding model a search of ``query`` against ``passages`` can run on; ChatInputError
    naming ``query``, ``passages``, ``model`` (a chat model) or ``compare`` (``base`` beside
    itself), or UnknownModel, otherwise. Nothing is loaded or embedded."""
    if not isinstance(query, str) or not query.strip():
        raise ChatInputError("query: type what to search for", fields=("query",))
    if len(query) > MAX_EMBEDDING_INPUT_CHARS // 2:
        raise ChatInputError(f"query: at most {MAX_EMBEDDING_INPUT_CHARS // 2:,} characters", fields=("query",))
    checked_passages(passages)
    choice = engine.resolve(model_id)
    if choice.serves != "embeddings":
        raise ChatInputError(
            f"model: {model_id} is a chat model, not an embedding model; choose an embedding run, its "
            "checkpoint, its base or an embedding export",
            fields=("model",),
            code="not_an_embedding_model",
        )
    if compare and choice.kind == "base":
        raise ChatInputError(
            "compare: the base model beside itself; choose a run or checkpoint to compare with its base model",
            fields=("compare",),
        )
    return choice


def search(engine: Embedder, model_id: str, query: str, passages: list[str], compare: bool = False) -> SearchResult:
    """Rank ``passages`` against ``query`` with embedding model ``model_id`` (and, ``compare``, with
    its base model). Raises what ``checked`` raises, and ChatUnavailable (a training job has the
    machine, the model's process ended)."""
    choice = checked(engine, model_id, query, passages, compare)
    texts = [(choice.query_prompt or "") + query, *passages]  # the prompt: at most 1,000 characters
    tuned = _ranked(engine.embed(choice.id, texts))
    base = _ranked(engine.embed(choice.id, texts, use_adapter=False)) if compare else None
    return SearchResult(tuned=tuned, base=base, query_prompt=choice.query_prompt)


def _ranked(embeddings: Embeddings) -> Ranking:
    vectors = np.asarray(embeddings.vectors)  # (1 + P, D): the query, then the passages
    return ranking(vectors[0], vectors[1:])
