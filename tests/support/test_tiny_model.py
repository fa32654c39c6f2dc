"""The tiny-model fixture itself: it is the real architecture and tokenizer shrunk, and the engine
trains it 2 steps, saves the adapter, reloads it and chats with it, as with the real model."""

from __future__ import annotations

import json
import os

from tests.conftest import train_to_completion
from tests.support.tiny_model import TINY_SIZES, build_tiny_model, tiny_sizes


def test_tiny_model_keeps_the_real_vocabulary_template_and_special_tokens(tiny_model_dir, model_dir, tmp_path):
    real = json.loads((model_dir / "config.json").read_text())
    tiny = json.loads((tiny_model_dir / "config.json").read_text())
    assert tiny_sizes(tiny_model_dir) == TINY_SIZES
    for key in ("architectures", "model_type", "vocab_size", "bos_token_id", "eos_token_id", "pad_token_id"):
        assert tiny[key] == real[key], key
    assert (tiny_model_dir / "chat_template.jinja").read_text() == (model_dir / "chat_template.jinja").read_text()
    assert (tiny_model_dir / "model.safetensors").stat().st_size < 20_000_000
    again = build_tiny_model(model_dir, tmp_path / "again")  # the same seed: the same weights
    assert (again / "model.safetensors").read_bytes() == (tiny_model_dir / "model.safetensors").read_bytes()


def test_tiny_model_trains_two_steps_saves_reloads_and_chats(tiny_model_dir, datasets_dir, tmp_path):
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.serving.schemas import ChatMessage, GenerationSettings
    from trainer_core.settings import Settings

    settings = Settings(
        data_dir=tmp_path / "data", allowed_paths=os.pathsep.join([str(datasets_dir), str(tiny_model_dir.parent)])
    )
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        max_steps=2,
        batch_size=2,
        max_seq_length=64,
        learning_rate=1e-2,
    )
    status, job_id, output_dir = train_to_completion(settings.runs_dir, settings.db_path, request)
    losses = [loss for loss in status.metric_history.loss if loss is not None]
    assert len(losses) == 2 and all(9.0 < loss < 12.0 for loss in losses)  # ln(49152) = 10.8: noise
    assert (output_dir / "adapter_model.safetensors").is_file() and (output_dir / "run.json").is_file()

    store = RunStore(settings.db_path)
    runner = JobRunner(runs_dir=settings.runs_dir, store=store, warm_modules=())
    engine = ChatEngine(runner, settings)
    try:
        assert [c.id for c in engine.choices()][:2] == ["base", job_id]
        answer = engine.complete(
            job_id,
            [ChatMessage(role="user", content="Who are you?")],
            GenerationSettings(temperature=0, max_new_tokens=8),
        )
        assert answer.finish_reason in ("stop", "length") and answer.completion_tokens >= 1
        assert engine.state()["loaded"] == job_id
    finally:
        engine.unload()
        store.close()
