"""Speech-to-text runs made as training makes them (``training.wiring.add_lora``: LoRA
on the encoder's and decoder's projections, the adapter and the processor saved, a ``run.json``
naming the run's language), for the serving tests; no training step is run, so the adapter's
weights are PEFT's random init (``init_lora_weights=False``): the tuned model differs from the base."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tests.support.speech_data import speech_request


def lora_speech_run(base: Path, folder: Path, language: str = "en") -> Path:
    """A LoRA run's folder of Whisper ``base`` in ``folder`` (adapter, processor, run.json)."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForSpeechSeq2Seq

    from trainer_core.kinds.speech_to_text.loading import load_processor
    from trainer_core.training.wiring import new_lora

    request = speech_request(base, folder / "none.json", language=language, task="transcribe")
    torch.manual_seed(0)
    model = AutoModelForSpeechSeq2Seq.from_pretrained(base)
    config = dataclasses.replace(new_lora(request, model), task_type=None, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(folder)
    load_processor(base).save_pretrained(folder)
    run = {"request": {"model_name": str(base), "language": language, "task": "transcribe"}}
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return folder


def add_run(store: Any, job_id: str, folder: Path, model_name: str) -> None:
    """A completed run ``job_id`` of ``model_name`` in the history, its output in ``folder``."""
    store.create_run(job_id, {"model_name": model_name}, str(folder), "loading_model")
    store.finish_run(job_id, "completed", None, None)
