"""An embedding run's dataset preview (``ModelKind.preview_rows`` through ``data.inspect``): the
shape found and the loss training chooses, the row count, the first rows column by column, rows over
Max seq length counted as training counts them; each bad row refused by row and column with the
same refusal training gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from trainer_core.data.errors import DatasetError
from trainer_core.data.inspect import inspect_dataset
from trainer_core.kinds.embedding.data import prepare_embedding_data
from trainer_core.kinds.embedding.kind import EMBEDDING
from trainer_core.refusals import Refusal
from trainer_core.schemas import TrainingStartRequest

ALPACA_PAIRS = {"anchor": "instruction", "positive": "output"}


@pytest.fixture(scope="module")
def encoder_tokenizer(tiny_encoder_dir: Path):
    return AutoTokenizer.from_pretrained(str(tiny_encoder_dir))


def _triplets(datasets_dir: Path, folder: Path, rows: int = 120) -> Path:
    """Triplets from the Alpaca demo: instruction, its output, the next row's output."""
    alpaca = json.loads((datasets_dir / "alpaca_en_demo.json").read_text(encoding="utf-8"))[: rows + 1]
    path = folder / "triplets.jsonl"
    lines = [
        json.dumps({"anchor": a["instruction"], "positive": a["output"], "negative": b["output"]})
        for a, b in zip(alpaca, alpaca[1:])
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _request(path: Path, **fields) -> TrainingStartRequest:
    return TrainingStartRequest(model_name="m", local_datasets=[str(path)], val_size=0, **fields)


def test_native_triplets_show_shape_loss_columns_and_the_rows_training_cuts(
    datasets_dir, tmp_path, tiny_encoder_dir, encoder_tokenizer
):
    path = _triplets(datasets_dir, tmp_path)
    request = _request(path, max_seq_length=64)
    found = inspect_dataset(str(path), tokenizer=encoder_tokenizer, kind=EMBEDDING, rows=3, request=request)
    assert found.layout == "embedding triplets: anchor / positive / negative — MultipleNegativesRankingLoss"
    assert found.format is None and found.rows_total == 120 and found.notes == []
    assert list(found.sample.columns) == ["row", "anchor", "positive", "negative"] and len(found.sample) == 3
    report = found.truncation
    stats = prepare_embedding_data(request, encoder_tokenizer).stats  # training's own count
    assert report.rows_over == stats.truncated_rows > 0 and report.longest_tokens == stats.longest_tokens
    assert (report.max_seq_length, report.rows_checked, report.all_rows_checked) == (64, 120, True)
    capped = inspect_dataset(
        str(path), tokenizer=encoder_tokenizer, kind=EMBEDDING, request=_request(path, max_seq_length=1024)
    )
    limit = encoder_tokenizer.model_max_length  # 256: the encoder's own limit is lower
    assert capped.truncation.max_seq_length == limit and f"model's own limit of {limit} tokens" in capped.notes[0]


def test_alpaca_mapped_by_embedding_columns_reads_as_pairs_and_unmapped_is_refused(datasets_dir):
    alpaca = datasets_dir / "alpaca_en_demo.json"
    mapped = _request(alpaca, embedding_columns=ALPACA_PAIRS)
    found = inspect_dataset(str(alpaca), kind=EMBEDDING, rows=2, request=mapped)
    assert found.layout == "embedding pairs: anchor / positive — MultipleNegativesRankingLoss"
    assert found.rows_total == 999 and found.truncation is None  # no tokenizer: no count
    assert list(found.sample.columns) == ["row", "anchor", "positive"]
    first = json.loads(alpaca.read_text(encoding="utf-8"))[0]
    assert found.sample["anchor"][0] == first["instruction"]
    with pytest.raises(DatasetError) as refused:
        inspect_dataset(str(alpaca), kind=EMBEDDING, request=_request(alpaca))
    assert refused.value.code == "generation_data_for_embedding" and "embedding_columns" in refused.value.fields


BAD = [
    ([{"anchor": "a", "positive": "b"}] * 2 + [{"anchor": "c", "positive": " "}], {}, "embedding_value_missing"),
    ([{"anchor": "a", "positive": "b"}, {"anchor": "c"}], {}, "embedding_value_missing"),
    (
        [{"sentence1": "a", "sentence2": "b", "score": 0.5}, {"sentence1": "c", "sentence2": "d", "score": 4.0}],
        {"embedding_loss": "CosineSimilarityLoss"},
        "embedding_score_out_of_range",
    ),
    ([{"question": "q", "answer": "a"}], {"embedding_columns": {"anchor": "question", "positive": "reply"}}, None),
]


@pytest.mark.parametrize(("rows", "fields", "code"), BAD)
def test_bad_rows_are_refused_by_row_and_column_as_training_refuses_them(
    tmp_path, encoder_tokenizer, rows, fields, code
):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    request = _request(path, **fields)
    with pytest.raises(DatasetError) as shown:
        inspect_dataset(str(path), tokenizer=encoder_tokenizer, kind=EMBEDDING, request=request)
    with pytest.raises(DatasetError) as trained:
        prepare_embedding_data(request, encoder_tokenizer)
    assert str(shown.value) == str(trained.value) and shown.value.code == trained.value.code
    if code is None:  # a mapped column the file lacks: named, with the file's columns
        assert shown.value.code == "embedding_column_missing" and "reply" in str(shown.value)
        return
    last = len(rows)
    assert shown.value.code == code and f"bad.jsonl: row {last}: " in str(shown.value)
    column = "score" if code == "embedding_score_out_of_range" else "column positive"
    assert column in str(shown.value)


def test_the_same_scores_read_under_cosent_and_a_loss_that_does_not_fit_is_refused(tmp_path):
    path = tmp_path / "scored.jsonl"
    rows = [{"sentence1": "a", "sentence2": "b", "score": 4.0}, {"sentence1": "c", "sentence2": "d", "score": 1}]
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    found = inspect_dataset(str(path), kind=EMBEDDING, request=_request(path))
    assert found.layout == "embedding scored: sentence1 / sentence2 / score — CoSENTLoss"
    assert list(found.sample.columns) == ["row", "sentence1", "sentence2", "score"]
    with pytest.raises(Refusal) as refused:
        inspect_dataset(str(path), kind=EMBEDDING, request=_request(path, embedding_loss="BatchAllTripletLoss"))
    assert refused.value.code == "embedding_loss_mismatch" and refused.value.fields == ("embedding_loss",)
