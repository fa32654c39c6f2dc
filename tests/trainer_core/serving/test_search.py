"""Search with an embedding model (``serving.search``) over the tiny encoder's LoRA run, its
embedding server run in-process: the ranking is the cosine of each passage with the query (as
``load_embedder(folder).encode`` gives them), best first, scores in [-1, 1]; the run's query_prompt
goes before the query; the base model's ranking differs; each refusal names its field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.embedding_runs import TEXTS, lora_embedding_run
from trainer_core.kinds.embedding.loading import load_embedder
from trainer_core.kinds.embedding.serve import EmbeddingServer
from trainer_core.serving.errors import ChatInputError, UnknownModel
from trainer_core.serving.schemas import Embeddings, ModelChoice
from trainer_core.serving.search import MAX_SEARCH_PASSAGES, ranking, search

PROMPT = "query: "


class InProcess:
    """The engine's ``resolve`` and ``embed`` over an ``EmbeddingServer`` in this process."""

    def __init__(self, choices: list[ModelChoice], models_dir) -> None:
        self.choices, self.models_dir, self.servers, self.calls = {c.id: c for c in choices}, models_dir, {}, []

    def resolve(self, model_id: str) -> ModelChoice:
        if model_id not in self.choices:
            raise UnknownModel(f"model {model_id!r}: no such model", fields=("model",))
        return self.choices[model_id]

    def embed(self, model_id, texts, dimensions=None, use_adapter=True) -> Embeddings:
        self.calls.append((model_id, texts[0], use_adapter))
        if model_id not in self.servers:
            self.servers[model_id] = EmbeddingServer(self.choices[model_id], self.models_dir, "cpu")
        answer = self.servers[model_id].answer({"input": texts, "dimensions": dimensions, "use_adapter": use_adapter})
        return Embeddings(vectors=answer["vectors"], prompt_tokens=answer["prompt_tokens"])


@pytest.fixture(scope="module")
def engine(tiny_encoder_dir, tmp_path_factory):
    folder = lora_embedding_run(tiny_encoder_dir, tmp_path_factory.mktemp("search") / "run")
    run = dict(kind="final", base_model=str(tiny_encoder_dir), path=str(folder), adapter=True, serves="embeddings")
    return InProcess(
        [
            ModelChoice(id="job_plain", label="plain", **run),
            ModelChoice(id="job_prompted", label="prompted", query_prompt=PROMPT, **run),
            ModelChoice(id="base", label="base", kind="base", base_model=str(tiny_encoder_dir), serves="embeddings"),
            ModelChoice(id="job_chat", label="chat", kind="final", base_model="org/base", path=str(folder)),
        ],
        tmp_path_factory.mktemp("models"),
    ), folder


def _cosines(model, query: str, passages: list[str]) -> np.ndarray:
    vectors = model.encode([query, *passages])
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors[1:] @ vectors[0]


def test_passages_are_ranked_by_cosine_tuned_beside_base(engine):
    fake, folder = engine
    query = TEXTS[1]  # the same text is one of the passages: cosine 1, ranked first
    result = search(fake, "job_plain", query, TEXTS, compare=True)
    expected = _cosines(load_embedder(folder), query, TEXTS)
    assert np.allclose(result.tuned.scores, expected, atol=1e-5)
    assert result.tuned.order[0] == 1 and result.tuned.scores[1] == pytest.approx(1.0, abs=1e-5)
    assert all(-1.0 <= s <= 1.0 for s in [*result.tuned.scores, *result.base.scores])
    assert list(result.tuned.scores[result.tuned.order]) == sorted(result.tuned.scores, reverse=True)
    assert sorted(result.tuned.ranks) == [1, 2, 3, 4] and result.tuned.ranks[result.tuned.order[0]] == 1
    base = _cosines(load_embedder(Path(fake.choices["base"].base_model)), query, TEXTS)
    assert np.allclose(result.base.scores, base, atol=1e-5)
    assert np.abs(result.base.scores - result.tuned.scores).max() > 1e-3  # the adapter changes the vectors
    assert result.query_prompt is None and fake.calls[-2:] == [
        ("job_plain", query, True),
        ("job_plain", query, False),
    ]


def test_the_runs_query_prompt_goes_before_the_query(engine):
    fake, folder = engine
    result = search(fake, "job_prompted", TEXTS[1], TEXTS)
    assert result.query_prompt == PROMPT and result.base is None
    assert fake.calls[-1] == ("job_prompted", PROMPT + TEXTS[1], True)
    assert np.allclose(result.tuned.scores, _cosines(load_embedder(folder), PROMPT + TEXTS[1], TEXTS), atol=1e-5)
    assert result.tuned.scores[1] < 0.9999  # the passage is no longer the query itself


def test_ties_keep_the_passages_order_and_ranks_count_from_one():
    found = ranking(np.array([1.0, 0.0]), np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 3.0], [-1.0, 0.0]]))
    assert found.order == [1, 0, 2, 3] and found.ranks == [2, 1, 3, 4]
    assert list(found.scores) == [0.0, 1.0, 0.0, -1.0]


@pytest.mark.parametrize(
    "model, query, passages, compare, field, words",
    [
        ("job_chat", "q", ["a"], False, "model", "not an embedding model"),
        ("job_nope", "q", ["a"], False, "model", "no such model"),
        ("base", "q", ["a"], True, "compare", "the base model beside itself"),
        ("job_plain", "  ", ["a"], False, "query", "type what to search for"),
        ("job_plain", "q", [], False, "passages", "at least one passage"),
        ("job_plain", "q", ["a", " "], False, "passages", "passage 2 is empty"),
        ("job_plain", "q", ["a"] * (MAX_SEARCH_PASSAGES + 1), False, "passages", "at most 1000 passages"),
        ("job_plain", "q", ["a" * 40_000], False, "passages", "passage 1 has 40,000 characters"),
        ("job_plain", "q" * 20_000, ["a"], False, "query", "at most 16,384 characters"),
    ],
    ids=["chat", "unknown", "base-compared", "no-query", "no-passages", "empty", "too-many", "too-long", "long-query"],
)
def test_each_refusal_names_its_field(engine, model, query, passages, compare, field, words):
    fake, _ = engine
    before = len(fake.calls)
    with pytest.raises(ChatInputError) as refused:
        search(fake, model, query, passages, compare=compare)
    assert refused.value.fields == (field,) and words in str(refused.value)
    assert str(refused.value).startswith(field)
    assert len(fake.calls) == before  # refused before anything was embedded
