"""Embedding runs through the worker's own ``train()`` (load, data, SentenceTransformerTrainer, save):
a LoRA run of the tiny encoder on Alpaca pairs (instruction -> anchor, output -> positive) that
evaluates retrieval on held-out pairs and saves a folder ``load_embedder`` reloads; a full fine-tune;
the tiny decoder as a last-token embedder; texts labelled with words (class ids); qlora refused."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path

import numpy as np
import pytest

from trainer_core.kinds.embedding.loading import load_embedder
from trainer_core.kinds.embedding.trainer import load_embedding_model
from trainer_core.refusals import Refusal
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.worker import EventKind, train

TEXTS = ["Give three tips for staying healthy.", "What is the capital of France?"]
PAIRS = {"anchor": "instruction", "positive": "output"}


def _request(model: Path, datasets_dir: Path, **fields) -> TrainingStartRequest:
    base = dict(
        model_name=str(model),
        local_datasets=[str(datasets_dir / "alpaca_en_demo.json")],
        embedding_columns=PAIRS,
        dataset_slice_end=24,
        batch_size=4,
        max_seq_length=48,
        learning_rate=5e-3,
        mixed_precision="no",
    )
    return TrainingStartRequest(**{**base, **fields})


def _base_scores(request: TrainingStartRequest, model: Path) -> dict[str, float]:
    """The held-out retrieval of the untrained model, as the run's evaluator scores it."""
    from trainer_core.kinds.embedding.data import prepare_embedding_data
    from trainer_core.kinds.embedding.evaluators import build_evaluator

    base = load_embedding_model(model, request, "cpu")
    data = prepare_embedding_data(request, base.tokenizer)
    return build_evaluator(data.eval, data.format, request.query_prompt, request.batch_size)(base)


def _events(events: queue.Queue) -> list[tuple[str, dict]]:
    found = []
    while not events.empty():
        found.append(events.get())
    return found


def test_a_lora_run_evaluates_retrieval_and_saves_a_folder_that_reloads_changed(
    tiny_encoder_dir, datasets_dir, tmp_path
):
    request = _request(tiny_encoder_dir, datasets_dir, max_steps=2, val_size=0.25, eval_steps=2)
    out, events = tmp_path / "run", queue.Queue()
    assert train(request, "job-embed", out, events, threading.Event()) == ("completed", None)
    progress = [payload for kind, payload in _events(events) if kind == EventKind.PROGRESS]
    evaluated = [p for p in progress if p["eval_loss"] is not None]
    assert [p["step"] for p in progress if p["loss"] is not None] == [1, 2]
    assert [p["step"] for p in evaluated] == [0, 2]  # the base before the first step, then the run
    base_scores = _base_scores(request, tiny_encoder_dir)
    assert evaluated[0]["eval_ndcg_at_10"] == pytest.approx(base_scores["cosine_ndcg@10"], abs=1e-6)
    evaluated = evaluated[1:]
    for name in ("eval_ndcg_at_10", "eval_mrr_at_10", "eval_recall_at_1", "eval_recall_at_10"):
        assert 0.0 <= evaluated[0][name] <= 1.0, name
    assert evaluated[0]["eval_recall_at_10"] >= evaluated[0]["eval_recall_at_1"]
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1]["eval_ndcg_at_10"] == evaluated[0]["eval_ndcg_at_10"]  # the run history's file
    files = {p.name for p in out.iterdir()}
    assert {"modules.json", "adapter_config.json", "adapter_model.safetensors", "run.json"} <= files
    assert "model.safetensors" not in files
    assert not {"README.md", "eval"} & files  # the library's own card and empty eval folder are left out
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["model_structure"]["adapted"]["count"] > 0  # BERT's linear layers found
    assert manifest["lora_config"]["task_type"] == "FEATURE_EXTRACTION"
    tuned, base = load_embedder(out).encode(TEXTS), load_embedder(tiny_encoder_dir).encode(TEXTS)
    assert np.abs(tuned - base).max() > 1e-3


def test_a_full_fine_tune_saves_the_whole_model(tiny_encoder_dir, datasets_dir, tmp_path):
    request = _request(tiny_encoder_dir, datasets_dir, max_steps=1, training_type="full")
    out = tmp_path / "run"
    assert train(request, "job-full", out, queue.Queue(), threading.Event())[0] == "completed"
    assert (out / "model.safetensors").is_file() and not (out / "adapter_config.json").exists()
    tuned, base = load_embedder(out).encode(TEXTS), load_embedder(tiny_encoder_dir).encode(TEXTS)
    assert np.abs(tuned - base).max() > 1e-4


def test_the_tiny_decoder_trains_as_a_last_token_embedder(tiny_model_dir, datasets_dir, tmp_path):
    request = _request(tiny_model_dir, datasets_dir, max_steps=1, is_embedding=True, query_prompt="Query: ")
    out = tmp_path / "run"
    assert train(request, "job-decoder", out, queue.Queue(), threading.Event())[0] == "completed"
    model = load_embedder(out)
    assert model[1].pooling_mode == "lasttoken" and model[0].tokenizer.padding_side == "left"
    assert np.abs(model.encode(TEXTS) - load_embedder(tiny_model_dir).encode(TEXTS)).max() > 1e-4


def test_qlora_is_refused_for_an_embedding_model(tiny_encoder_dir, datasets_dir):
    request = _request(tiny_encoder_dir, datasets_dir, training_type="qlora")
    with pytest.raises(Refusal) as refused:
        load_embedding_model(tiny_encoder_dir, request, "cpu")
    assert refused.value.fields == ("training_type",) and refused.value.code == "qlora_embedding"


def test_evaluator_metrics_are_logged_again_under_the_progress_names():
    from trainer_core.kinds.embedding.evaluators import progress_metrics

    logs = {"eval_loss": 1.5, "eval_cosine_ndcg@10": 0.7, "eval_cosine_recall@1": 0.4, "eval_spearman_cosine": 0.2}
    named = progress_metrics(logs)
    assert named["eval_ndcg_at_10"] == 0.7 and named["eval_recall_at_1"] == 0.4 and named["eval_spearman"] == 0.2
    assert named["eval_cosine_ndcg@10"] == 0.7 and progress_metrics({"loss": 1.0}) == {"loss": 1.0}


def test_early_stopping_ends_an_embedding_run_and_keeps_its_best_adapter(tiny_encoder_dir, datasets_dir, tmp_path):
    """Patience 1 and a threshold no evaluation can beat: the run ends at its second evaluation
    with the reason said, and the best checkpoint (an adapter) is loaded back before the final save."""
    request = _request(
        tiny_encoder_dir,
        datasets_dir,
        max_steps=20,
        val_size=0.25,
        eval_steps=1,
        early_stopping_patience=1,
        early_stopping_threshold=100.0,
    )
    out = tmp_path / "run"
    phase, reason = train(request, "job-early", out, queue.Queue(), threading.Event())
    assert phase == "completed" and reason.startswith("Stopped early at step 2: eval_loss did not improve"), reason
    assert "(best " in reason and "at step 1)" in reason
    assert (out / "adapter_model.safetensors").is_file() and "model.safetensors" not in {p.name for p in out.iterdir()}
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in logged) == 2


def test_texts_labelled_with_words_train_as_class_ids(tiny_encoder_dir, tmp_path):
    rows = [{"text": f"a {colour} thing, number {i}", "label": colour} for i, colour in enumerate(["red", "blue"] * 6)]
    data = tmp_path / "labelled.jsonl"
    data.write_text("\n".join(json.dumps(row) for row in rows))
    request = _request(
        tiny_encoder_dir,
        tmp_path,
        local_datasets=[str(data)],
        embedding_columns=None,
        dataset_slice_end=12,
        max_steps=1,
    )
    assert train(request, "job-labels", tmp_path / "run", queue.Queue(), threading.Event())[0] == "completed"
