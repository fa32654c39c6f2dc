"""The pre-flight check of an embedding run (``kinds.embedding.check``): rows, the loss chosen,
lengths in tokens, truncation and duplicate anchors / positives in its line; a loss or Matryoshka
sizes that cannot apply as errors naming their field."""

from __future__ import annotations

import json
import time

from transformers import AutoTokenizer

from trainer_core.kinds.embedding.check import embedding_dimension, embedding_report
from trainer_core.schemas import TrainingStartRequest

ROWS = [
    {"query": "how to reset a password", "document": "Open settings and choose reset password."},
    {"query": "how to reset a password", "document": "Use the link in the email."},  # a duplicate anchor
    {"query": "capital of france", "document": "Paris is the capital of France. " * 40},  # long: cut at 32
    {"query": "boiling point of water", "document": "Water boils at 100 degrees Celsius."},
]


def _report(tiny_encoder_dir, tmp_path, **fields):
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in ROWS), encoding="utf-8")
    request = TrainingStartRequest(
        model_name=str(tiny_encoder_dir), local_datasets=[str(data)], max_seq_length=32, batch_size=2, **fields
    )
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder_dir))
    return embedding_report(request, tiny_encoder_dir, tokenizer, time.perf_counter())


def test_the_check_line_counts_rows_truncation_and_false_negatives(tiny_encoder_dir, tmp_path):
    report = _report(tiny_encoder_dir, tmp_path, num_epochs=1)
    assert report.errors == []
    assert report.rows_kept == 4 and report.rows_truncated == 1 and report.total_steps == 2
    line = report.vision
    assert line.startswith("Embedding pairs (anchor, positive): 4 rows; loss MultipleNegativesRankingLoss")
    assert "1 rows (25.0 %) cut at 32" in line and "1 duplicate anchors, 0 duplicate positives" in line


def test_memory_and_time_are_estimated_without_an_lm_head(tiny_encoder_dir, tmp_path):
    """The estimates of the text models, fed with the encoder's config: the longest batch is 2 rows
    of two texts cut at 32 tokens, no logits are held; a model folder without its config: none."""
    from trainer_core.kinds.embedding.estimates import NOT_HERE

    report = _report(tiny_encoder_dir, tmp_path, num_epochs=1)
    assert report.no_estimates is None and report.memory is not None and report.time is not None
    assert report.memory.parts_gib["logits"] == 0 and report.memory.parts_gib["activations"] > 0
    assert report.memory_estimate_gib == round(report.memory.total_gib, 3) > 0
    assert report.time_estimate_seconds == round(report.time.total_seconds, 1) > 0
    assert report.time.tokens_per_second > 0 and "train_steps" in report.time.parts_seconds
    assert "longest batch 128 tokens (all embedded, no LM head)" in report.memory.basis  # 2 rows x 2 texts x 32
    bare = tmp_path / "no-config"
    bare.mkdir()
    for name in ("modules.json", "tokenizer.json", "tokenizer_config.json"):
        (bare / name).write_bytes((tiny_encoder_dir / name).read_bytes())
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder_dir))
    rows = tmp_path / "pairs.jsonl"
    again = embedding_report(
        TrainingStartRequest(model_name=str(tiny_encoder_dir), local_datasets=[str(rows)], max_seq_length=32),
        bare,
        tokenizer,
        time.perf_counter(),
    )
    assert again.no_estimates == NOT_HERE and again.memory is None


def test_a_loss_or_sizes_that_cannot_apply_are_errors_naming_their_field(tiny_encoder_dir, tmp_path):
    assert embedding_dimension(tiny_encoder_dir) == 64
    loss = _report(tiny_encoder_dir, tmp_path, embedding_loss="CoSENTLoss").errors
    assert [(e.code, e.fields) for e in loss] == [("embedding_loss_mismatch", ["embedding_loss"])]
    dims = _report(tiny_encoder_dir, tmp_path, matryoshka_dims=[128, 32]).errors
    assert [(e.code, e.fields) for e in dims] == [("matryoshka_dims_too_large", ["matryoshka_dims"])]
    unread = _report(tiny_encoder_dir, tmp_path, mini_batch_size=8).errors  # pairs chose the uncached loss
    assert [(e.code, e.fields) for e in unread] == [
        ("mini_batch_size_without_cached_loss", ["mini_batch_size", "embedding_loss"])
    ]
    cached = _report(tiny_encoder_dir, tmp_path, mini_batch_size=8, embedding_loss="CachedMultipleNegativesRankingLoss")
    assert cached.errors == []
    qlora = _report(tiny_encoder_dir, tmp_path, training_type="qlora").errors  # the check says what Start would
    assert [(e.code, e.fields) for e in qlora] == [("qlora_embedding", ["training_type"])]


def test_a_module_folder_linked_out_of_the_model_is_an_error_naming_model_name(tiny_encoder_dir, tmp_path):
    import os
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(tiny_encoder_dir, folder)
    shutil.rmtree(folder / "1_Pooling")
    os.symlink(tmp_path, folder / "1_Pooling")  # outside the model's folder
    errors = _report(folder, tmp_path).errors
    assert [(e.code, e.fields) for e in errors] == [("embedding_modules_outside", ["model_name"])]
    assert "module 1 (Pooling) is read from '1_Pooling', outside the model's folder" in errors[0].message


def test_every_line_of_the_report_is_true_for_embedding_rows(tiny_encoder_dir, tmp_path):
    """Texts are cut at max_seq_length, not dropped: the tokens cut, the tokens kept, the per-file
    table (with each file's rows held out by val_size), the histogram of each row's longest text and
    the text runs' warning above 5 % of rows cut."""
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_encoder_dir))
    long_doc = tokenizer(ROWS[2]["document"])["input_ids"]
    report = _report(tiny_encoder_dir, tmp_path, num_epochs=1)
    every = sum(len(tokenizer(t)["input_ids"]) for row in ROWS for t in row.values())
    assert report.tokens_cut == len(long_doc) - 32 > 0
    assert report.tokens_total == report.tokens_trained == every - report.tokens_cut
    assert [(f.name, f.split, f.rows_read, f.rows_kept, f.rows_dropped) for f in report.files] == [
        ("pairs.jsonl", "train", 4, 4, 0)
    ]
    assert sum(report.histogram.counts) == 4 and report.histogram.edges[-1] >= len(long_doc)
    (warning,) = [w for w in report.warnings if w.code == "rows_truncated"]
    assert warning.fields == ["max_seq_length"] and warning.message.startswith("1 of 4 training rows (25%) have a text")
    assert f"({len(long_doc) - 32} tokens lost): set max_seq_length to" in warning.message
    more = tmp_path / "more.jsonl"
    more.write_text("\n".join(json.dumps({"query": f"q{i}", "document": f"d{i}"}) for i in range(6)), encoding="utf-8")
    request = TrainingStartRequest(
        model_name=str(tiny_encoder_dir),
        local_datasets=[str(tmp_path / "pairs.jsonl"), str(more)],
        max_seq_length=512,
        val_size=0.3,
    )
    split = embedding_report(request, tiny_encoder_dir, tokenizer, time.perf_counter())
    first, second = split.files
    assert (first.rows_read, second.rows_read) == (4, 6) and first.rows_kept + second.rows_kept == split.rows_kept == 7
    held = [int(f.notes[0].split()[0]) for f in split.files]
    assert sum(held) == split.eval_rows == 3 and [f.rows_read - f.rows_kept for f in split.files] == held
    (capped,) = [w for w in split.warnings if w.code == "rows_truncated"]  # the tokenizer's limit is below 512
    limit = tokenizer.model_max_length
    assert (
        split.tokens_cut == len(long_doc) - limit and f"the model's limit of {limit} tokens (below " in capped.message
    )
