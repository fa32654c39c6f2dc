"""An embedding run's data: each shape of columns (as sentence-transformers names them, or mapped
with ``embedding_columns``) and the loss and batch sampler it chooses; the refusals, each naming its
field: generation data for an embedder, embedding pairs for a text generator, a missing mapped
column, a loss that does not fit, Matryoshka sizes above the model's, and the schema's rules."""

from __future__ import annotations

import datasets
import pytest
from pydantic import ValidationError

from trainer_core.data.errors import DatasetError
from trainer_core.data.formats import detect_format
from trainer_core.kinds.embedding.data import Shape, embedding_rows
from trainer_core.kinds.embedding.loading import load_embedder
from trainer_core.kinds.embedding.losses import batch_sampler, build_loss, check_dims, chosen_loss
from trainer_core.refusals import Refusal
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import EmbeddingLoss


def _request(**fields) -> TrainingStartRequest:
    return TrainingStartRequest(model_name="m", local_datasets=["a.json"], **fields)


SHAPES = [
    ({"query": ["q"], "document": ["d"]}, Shape.pairs, ["anchor", "positive"], "MultipleNegativesRankingLoss"),
    (
        {"negative": ["n"], "anchor": ["a"], "positive": ["p"], "id": [1]},
        Shape.triplets,
        ["anchor", "positive", "negative"],
        "MultipleNegativesRankingLoss",
    ),
    (
        {"sentence1": ["a"], "sentence2": ["b"], "score": [1]},
        Shape.scored,
        ["sentence1", "sentence2", "score"],
        "CoSENTLoss",
    ),
    ({"label": [0], "text": ["t"]}, Shape.labelled, ["text", "label"], "BatchSemiHardTripletLoss"),
]


@pytest.mark.parametrize(("columns", "shape", "order", "loss"), SHAPES)
def test_each_shape_picks_its_loss_and_sampler(columns, shape, order, loss):
    rows, found = embedding_rows(datasets.Dataset.from_dict(columns), None, "data.json")
    assert found == shape and rows.column_names == order
    chosen = chosen_loss(_request(), shape)
    assert chosen.value == loss
    expected = {Shape.scored: "batch_sampler", Shape.labelled: "group_by_label"}.get(shape, "no_duplicates")
    assert batch_sampler(chosen) == expected


def test_mapped_columns_become_the_parts_they_play():
    rows = datasets.Dataset.from_dict({"instruction": ["i"], "input": [""], "output": ["o"]})
    mapped, shape = embedding_rows(rows, {"anchor": "instruction", "positive": "output"}, "alpaca.json")
    assert shape == Shape.pairs and mapped[0] == {"anchor": "i", "positive": "o"}


def test_generation_data_for_an_embedder_is_refused_with_the_mapping_to_use():
    rows = datasets.Dataset.from_dict({"instruction": ["i"], "output": ["o"]})
    with pytest.raises(DatasetError) as refused:
        embedding_rows(rows, None, "alpaca.json")
    assert refused.value.code == "generation_data_for_embedding" and "embedding_columns" in refused.value.fields
    assert '{"anchor": "instruction", "positive": "output"}' in str(refused.value) and "alpaca.json" in str(
        refused.value
    )


def test_a_mapped_column_the_file_lacks_is_refused():
    rows = datasets.Dataset.from_dict({"question": ["q"], "answer": ["a"]})
    with pytest.raises(DatasetError) as refused:
        embedding_rows(rows, {"anchor": "question", "positive": "reply"}, "qa.csv")
    assert refused.value.fields == ("embedding_columns",) and "reply" in str(refused.value)


def test_embedding_pairs_for_a_text_generator_are_refused():
    with pytest.raises(DatasetError) as refused:
        detect_format(["anchor", "positive"], "pairs.jsonl")
    assert refused.value.code == "embedding_data_for_generator" and "is_embedding" in refused.value.fields


def test_a_loss_that_does_not_fit_the_columns_is_refused():
    with pytest.raises(Refusal) as refused:
        chosen_loss(_request(embedding_loss="CoSENTLoss"), Shape.pairs)
    assert refused.value.fields == ("embedding_loss",) and "MultipleNegativesRankingLoss" in str(refused.value)


def test_matryoshka_sizes_above_the_model_are_refused():
    with pytest.raises(Refusal) as refused:
        check_dims(_request(matryoshka_dims=[128, 32]), 64)
    assert refused.value.fields == ("matryoshka_dims",) and "128" in str(refused.value)
    check_dims(_request(matryoshka_dims=[64, 32]), 64)  # sizes up to the model's pass


def test_cached_and_matryoshka_losses_are_built_as_asked(tiny_encoder_dir):
    model = load_embedder(tiny_encoder_dir)
    asked = _request(embedding_loss="CachedMultipleNegativesRankingLoss", mini_batch_size=2, matryoshka_dims=[32, 64])
    loss = build_loss(asked, model, Shape.pairs)
    assert type(loss).__name__ == "MatryoshkaLoss" and tuple(loss.matryoshka_dims) == (64, 32)
    assert type(loss.loss).__name__ == "CachedMultipleNegativesRankingLoss" and loss.loss.mini_batch_size == 2


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (dict(is_embedding=False, matryoshka_dims=[64]), "matryoshka_dims"),
        (dict(is_embedding=True, training_method="dpo"), "training_method"),
        (dict(embedding_loss=EmbeddingLoss.CoSENTLoss, mini_batch_size=8), "mini_batch_size"),
    ],
)
def test_the_schema_refuses_embedding_settings_that_cannot_apply(fields, named):
    with pytest.raises(ValidationError) as refused:
        _request(**fields)
    assert named in str(refused.value)
