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
    assert "anchor=instruction, positive=output" in str(refused.value) and "alpaca.json" in str(refused.value)
    assert str(refused.value).count("embedding_columns") == 1  # the form swaps it for its label and section


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


BAD_ROWS = [  # (rows of a user's JSONL file, the code, words of the refusal): as a careless user brings them
    ([{"anchor": ["a", "b"], "positive": "p"}], "embedding_value_not_text", "row 1: column anchor holds a list"),
    ([{"anchor": "a", "positive": {"t": 1}}], "embedding_value_not_text", "row 1: column positive holds a dict"),
    ([{"anchor": "a", "positive": "p"}, {"anchor": 3, "positive": [1]}], "embedding_value_not_text", "row 2"),
    ([{"anchor": "a", "positive": "p", "negative_1": ["n"]}], "embedding_value_not_text", "column negative_1"),
    ([{"anchor": "a", "positive": "p"}, {"anchor": None, "positive": "p"}], "embedding_value_missing", "row 2"),
    ([{"anchor": "a", "positive": "p"}, {"anchor": "b"}], "embedding_value_missing", "row 2: column positive"),
    ([{"anchor": "  ", "positive": "p"}], "embedding_value_missing", "row 1: column anchor is empty"),
    ([{"sentence1": "a", "sentence2": "b", "score": "high"}], "embedding_score_not_number", "score 'high'"),
    (
        [{"sentence1": "a", "sentence2": "b", "score": 0.5}, {"sentence1": "a", "sentence2": "b", "score": None}],
        "embedding_score_not_number",
        "row 2: score None",
    ),
    ([{"sentence1": "a", "sentence2": "b", "score": True}], "embedding_score_not_number", "row 1"),
    ([{"text": "a", "label": 1}, {"text": "b", "label": None}], "embedding_value_missing", "row 2: column label"),
    ([{"text": "a", "label": 1}, {"text": "b", "label": [1]}], "embedding_value_not_text", "row 2: column label"),
]


def _jsonl(tmp_path, rows, name="rows.jsonl"):
    import json

    path = tmp_path / name
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    return datasets.load_dataset("json", data_files=str(path), split="train")


@pytest.mark.parametrize("rows,code,words", BAD_ROWS)
def test_rows_that_cannot_be_embedded_are_refused_naming_the_row_and_column(tmp_path, rows, code, words):
    with pytest.raises(DatasetError) as refused:
        embedding_rows(_jsonl(tmp_path, rows), None, "mine.jsonl")
    assert refused.value.code == code and str(refused.value).startswith("mine.jsonl: ")
    assert words in str(refused.value) and "embedding_columns" in refused.value.fields


def test_numbers_in_text_columns_become_texts_and_odd_labels_class_ids(tmp_path):
    from trainer_core.kinds.embedding.data import label_ids

    pairs, shape = embedding_rows(
        _jsonl(tmp_path, [{"anchor": 7, "positive": "p"}, {"anchor": "x", "positive": 2.5}]), None, "f"
    )
    assert shape == Shape.pairs and pairs["anchor"] == ["7", "x"] and pairs["positive"] == ["p", "2.5"]
    rows = [
        {"text": f"t{i}", "label": label} for i, label in enumerate(["x", 2, "x", 0.5])
    ]  # mixed types: a Json column
    labelled, _ = embedding_rows(_jsonl(tmp_path, rows), None, "f")
    held, _ = embedding_rows(
        _jsonl(tmp_path, [{"text": "u", "label": 2}, {"text": "v", "label": "new"}], "e.jsonl"), None, "e"
    )
    train, evaluation = label_ids(labelled, held)
    assert train["label"] == [0, 1, 0, 2] and evaluation["label"] == [1, 3]  # one numbering across the splits
    assert train.column_names == ["text", "label"] and train.features["label"].dtype == "int64"
    ints = datasets.Dataset.from_dict({"text": ["a"], "label": [5]})
    assert label_ids(ints, None)[0]["label"] == [5]  # whole-number labels kept as they are


def test_labelled_rows_that_cannot_fill_label_grouped_batches_are_refused(tiny_encoder_dir, tmp_path):
    from transformers import AutoTokenizer

    from trainer_core.kinds.embedding.data import prepare_embedding_data

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder_dir))

    def prepared(labels, **fields):
        import json

        path = tmp_path / "labelled.jsonl"
        path.write_text("\n".join(json.dumps({"text": f"text {i}", "label": x}) for i, x in enumerate(labels)))
        return prepare_embedding_data(
            TrainingStartRequest(model_name="m", local_datasets=[str(path)], **fields), tokenizer
        )

    with pytest.raises(DatasetError) as unique:
        prepared(list(range(8)))  # each label once: no positive for any text
    assert unique.value.code == "embedding_labels_too_few" and "12" not in str(unique.value)
    assert "hold 8 labels, 0 of them on 2 or more rows" in str(unique.value)
    with pytest.raises(DatasetError) as held:
        prepared(["red", "blue"] * 6, val_size=0.25)  # 3 held-out rows: one label at most twice
    assert held.value.fields == ("val_size", "local_eval_datasets") and "the held-out rows (3)" in str(held.value)
    data = prepared(["red", "blue", "green"] * 4)
    assert data.train["label"] == [0, 1, 2] * 4
