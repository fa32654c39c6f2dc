"""Exports as models to talk to: a text run's GGUF files are chat models; an embedding run's GGUF
files are not (llama.cpp serves them), its merged folder is listed as serving embeddings."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_core.llamacpp.build import missing_message
from trainer_core.runs.store import RunStore
from trainer_core.settings import Settings, get_settings
from trainer_core.tasks.export_models import ExportModels
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from trainer_core.tasks.store import TaskStore


def _export(tasks: TaskStore, task_id: str, job_id: str, folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "model-f16.gguf").write_bytes(b"GGUF")
    result = {"format": "gguf-f16", "gguf": [{"name": "model-f16.gguf", "type": "f16", "check": {"passed": True}}]}
    record = TaskRecord(task_id=task_id, kind=TaskKind.export, job_id=job_id, model=job_id, output_dir=str(folder))
    tasks.save(record.model_copy(update={"phase": TaskPhase.completed, "result": result}))


def test_an_embedding_runs_gguf_is_not_a_chat_model(tmp_path, tiny_encoder_dir):
    if missing_message(get_settings().llama_cpp_dir):
        pytest.skip("llama.cpp is not built here: no GGUF file is listed at all")
    settings = Settings(data_dir=tmp_path / "data", llama_cpp_dir=get_settings().llama_cpp_dir)
    runs, tasks = RunStore(settings.db_path), TaskStore(settings.db_path)
    runs.create_run("job_text", {"model_name": "HuggingFaceTB/SmolLM2-135M-Instruct"}, str(tmp_path), "completed")
    runs.create_run("job_embed", {"model_name": "x", "is_embedding": True}, str(tmp_path), "completed")
    runs.create_run("job_found", {"model_name": str(tiny_encoder_dir)}, str(tmp_path), "completed")  # its folder says
    for job in ("job_text", "job_embed", "job_found"):
        _export(tasks, f"export-20261206-100000-{job[-4:]}", job, settings.data_dir / "exports" / job)
    listed = {choice.job_id for choice in ExportModels(tasks, runs, settings).list()}
    assert listed == {"job_text"}
