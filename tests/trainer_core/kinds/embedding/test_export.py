"""An embedding run's exports through the export worker (``export.worker.export``, in-process):
the adapter zip and the merged sentence-transformers folder (loaded back by the library itself),
the model card's facts, and the refusals before anything is converted. The GGUF files checked in
llama.cpp: ``test_gguf.py``."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.support.exports import run_export
from trainer_core.export.schemas import ExportRequest
from trainer_core.export.start import export_refusal
from trainer_core.export.worker import ExportError
from trainer_core.kinds.embedding.export import CHECK_SENTENCES, cosines, model_files
from trainer_core.kinds.embedding.gguf import gguf_problem, pooling_mode
from trainer_core.kinds.embedding.loading import load_embedder, save_embedder
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import get_settings

METRICS = [
    {"step": 5, "loss": 1.25},
    {"step": 10, "loss": 0.75, "eval_ndcg_at_10": 0.4125, "eval_recall_at_1": 0.25},
    {"step": 10, "eval_loss": 0.5},
]
REQUEST = {
    "model_name": "BASE",
    "training_type": "lora",
    "is_embedding": True,
    "embedding_loss": "MultipleNegativesRankingLoss",
    "embedding_columns": {"anchor": "instruction", "positive": "output"},
    "matryoshka_dims": [64, 32],
    "query_prompt": "query: ",
    "local_datasets": ["/data/pairs.jsonl"],
}


def make_run(base: Path, folder: Path, lora: bool = True) -> Path:
    """A run folder as an embedding run leaves it: ``save_embedder``'s files (LoRA: module files +
    adapter; full: the whole model, changed), ``request.json`` and ``metrics.jsonl``."""
    import torch
    from peft import LoraConfig, TaskType, get_peft_model

    model = load_embedder(base)
    torch.manual_seed(1)
    if lora:
        config = LoraConfig(
            task_type=TaskType.FEATURE_EXTRACTION, r=4, target_modules="all-linear", init_lora_weights=False
        )
        model[0].model = get_peft_model(model[0].model, config)
    else:
        with torch.no_grad():
            for p in model[0].model.parameters():
                p.add_(torch.randn_like(p) * 0.02)
    save_embedder(model, folder)
    request = {**REQUEST, "model_name": str(base), "training_type": "lora" if lora else "full"}
    (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
    (folder / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in METRICS), encoding="utf-8")
    (folder / "worker.log").write_text("trainer_core.data.prepare: pairs.jsonl: format pairs, 48 rows\n")
    return folder


@pytest.fixture(scope="module")
def encoder_run(tiny_encoder_dir, tmp_path_factory) -> Path:
    return make_run(tiny_encoder_dir, tmp_path_factory.mktemp("emb-run") / "job_emb")


def test_the_adapter_zip_is_the_sentence_transformers_folder_and_loads_to_the_runs_vectors(
    encoder_run, tiny_encoder_dir, tmp_path
):
    result, messages = run_export(encoder_run, tiny_encoder_dir, "adapter", tmp_path / "out")
    assert result.passed and result.check.checked_by == "sentence-transformers"
    assert result.check.prompts_total == len(CHECK_SENTENCES) and result.check.cosine_min >= 0.9999
    assert [f.name for f in result.files] == ["job_emb-adapter.zip"]
    with zipfile.ZipFile(tmp_path / "out" / "job_emb-adapter.zip") as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path / "unzipped")
    assert {"modules.json", "adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= names
    assert {"1_Pooling/config.json", "sentence_bert_config.json", "README.md"} <= names
    assert not names & {"request.json", "metrics.jsonl", "worker.log", "model.safetensors"}
    want = load_embedder(encoder_run).encode(list(CHECK_SENTENCES))
    got = load_embedder(tmp_path / "unzipped", base=tiny_encoder_dir).encode(list(CHECK_SENTENCES))
    assert min(cosines(want, got)) > 0.99999
    card = (tmp_path / "unzipped" / "README.md").read_text()
    assert "library_name: sentence-transformers" in card and "PEFT 0.22" in card and "load_embedder(" in card
    assert "Embedding 4 check sentences with the run as trained" in messages


def test_the_merged_folder_loads_with_sentence_transformer_alone_to_the_runs_vectors(
    encoder_run, tiny_encoder_dir, tmp_path
):
    from sentence_transformers import SentenceTransformer

    result, _ = run_export(encoder_run, tiny_encoder_dir, "merged", tmp_path / "out", dtype="float16")
    out = tmp_path / "out"
    assert result.passed and result.dtype == "float16" and result.check.cosine_min >= 0.999
    assert not (out / "adapter_config.json").exists() and (out / "model.safetensors").is_file()
    want = load_embedder(encoder_run).encode(list(CHECK_SENTENCES))
    got = SentenceTransformer(str(out), device="cpu").encode(list(CHECK_SENTENCES))  # the library itself
    assert min(cosines(want, got)) >= 0.999
    untouched = load_embedder(tiny_encoder_dir).encode(list(CHECK_SENTENCES))
    assert min(cosines(untouched, got)) < 0.999  # the adapter is in it
    card = (out / "README.md").read_text()
    assert f"base_model: {tiny_encoder_dir}" not in card  # a local folder is no Hub id
    assert "loss: `MultipleNegativesRankingLoss`" in card and "`pairs.jsonl`: 48 rows used" in card
    assert "eval_ndcg_at_10: 0.4125" in card and "eval_recall_at_1: 0.2500" in card and "eval_loss: 0.5000" in card
    assert "matryoshka_dims: `[64, 32]`" in card and 'prompt="query: "' in card
    assert 'SentenceTransformer("PATH_TO_THIS_FOLDER")' in card and "Passed (sentence-transformers)" in card


def test_a_full_fine_tune_has_no_adapter_and_exports_merged(tiny_encoder_dir, tmp_path):
    run = make_run(tiny_encoder_dir, tmp_path / "job_emb", lora=False)
    with pytest.raises(ExportError, match="full fine-tune: it has no adapter"):
        run_export(run, tiny_encoder_dir, "adapter", tmp_path / "a")
    result, _ = run_export(run, tiny_encoder_dir, "merged", tmp_path / "m", dtype="float32")
    assert result.passed and result.check.cosine_min > 0.99999
    assert "Full fine-tune" in result.notes[0]


def test_model_files_keep_the_model_and_leave_the_run_out(encoder_run, tmp_path):
    names = model_files(encoder_run)
    assert "modules.json" in names and "1_Pooling/config.json" in names and "adapter_model.safetensors" in names
    assert not {"request.json", "metrics.jsonl", "worker.log", "README.md"} & set(names)
    assert pooling_mode(encoder_run) == "mean"


def test_what_llama_cpp_cannot_embed_is_refused_before_converting(encoder_run, tmp_path):
    converter = get_settings().gguf_converter_dir
    config = json.loads((encoder_run / "config.json").read_text())
    assert gguf_problem(encoder_run, config, converter) is None
    mpnet = {**config, "architectures": ["MPNetModel"], "model_type": "mpnet"}  # all-mpnet-base-v2
    problem = gguf_problem(encoder_run, mpnet, converter)
    assert "does not support the architecture MPNetModel" in problem and "llama.cpp embeds BERT-style" in problem
    folder = tmp_path / "maxpool"
    folder.mkdir()
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    assert "not 'max_tokens'" in gguf_problem(folder, config, converter)
    dense = json.loads((folder / "modules.json").read_text()) + [{"path": "2_Dense", "type": "x.Dense"}]
    (folder / "modules.json").write_text(json.dumps(dense))
    assert "Dense module" in gguf_problem(folder, config, converter)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "config.json").write_text(json.dumps({"pooling_mode": "secret-value"}))
    (folder / "modules.json").write_text(json.dumps([dense[0], {**dense[1], "path": "../outside"}]))
    outside = gguf_problem(folder, config, converter)  # never read: its value stays out of the message
    assert "is read from '../outside', outside the model's folder" in outside and "secret" not in outside


def test_the_start_of_a_gguf_export_refuses_an_encoder_llama_cpp_cannot_write(encoder_run, tmp_path):
    settings = get_settings()
    base = tmp_path / "all-mpnet-base-v2"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"architectures": ["MPNetModel"], "model_type": "mpnet"}))
    choice = ModelChoice(id="job_emb", label="job_emb", kind="final", base_model=str(base), path=str(encoder_run))
    choice.adapter = True
    problem = export_refusal(
        choice, ExportRequest(model="job_emb", format="gguf-f16"), settings.gguf_converter_dir, settings.models_dir
    )
    assert problem.startswith("GGUF export does not support the architecture MPNetModel")
    assert "llama.cpp embeds BERT-style encoders" in problem  # the embedding kind's words (its folder says so)


def test_cosines_are_row_wise_and_zero_for_mismatched_shapes():
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert cosines(a, np.array([[2.0, 0.0], [1.0, 1.0]])) == pytest.approx([1.0, 2**-0.5])
    assert cosines(a, np.ones((2, 3))) == [0.0, 0.0]
