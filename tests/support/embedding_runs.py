"""Embedding runs made as training makes them (``kinds.embedding.loading``: an embedder, LoRA through
PEFT's ``get_peft_model``, ``save_embedder``), for the serving tests; no training step is run, so
the adapter's weights are PEFT's random init (``init_lora_weights=False``): tuned vectors differ
from the base's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TEXTS = [
    "How do I reset my password?",
    "The cat sat on the mat.",
    "Einstein was born in 1879.",
    "Water boils at 100 degrees Celsius at sea level.",
]


def lora_embedding_run(base: Path, folder: Path, rank: int = 4) -> Path:
    """A LoRA run's folder of embedder ``base`` in ``folder`` (module files + adapter, no base weights)."""
    from peft import LoraConfig, TaskType, get_peft_model

    from trainer_core.kinds.embedding.loading import load_embedder, save_embedder

    model = load_embedder(base)
    config = LoraConfig(
        task_type=TaskType.FEATURE_EXTRACTION, r=rank, target_modules="all-linear", init_lora_weights=False
    )
    model[0].model = get_peft_model(model[0].model, config)
    save_embedder(model, folder)
    return folder


def add_run(store: Any, job_id: str, folder: Path, model_name: str) -> None:
    """A completed run ``job_id`` of ``model_name`` in the history, its output in ``folder``."""
    store.create_run(job_id, {"model_name": model_name, "is_embedding": True}, str(folder), "loading_model")
    store.finish_run(job_id, "completed", None, None)
