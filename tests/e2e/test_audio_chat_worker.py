"""An audio chat run in the training worker's own code, in this process: 3 full fine-tuning steps
of the tiny Qwen2-Audio on LLaMA-Factory's ``mllm_audio_demo.json`` (the clips read from
``mllm_demo_data``), its data line naming the family and the clips, the weights changed and saved
with the processor."""

from __future__ import annotations

import json
import queue
import threading

import pytest
from safetensors.torch import load_file

from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings
from trainer_core.training.worker import train

pytestmark = pytest.mark.slow  # no process started, but about 40 s on 2 shared cores (the 49k-token LM head)


def test_three_full_steps_on_the_demo_clips(tiny_audio_chat_dir, datasets_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", f"{datasets_dir}:{tiny_audio_chat_dir.parent}")
    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "studio"))
    get_settings.cache_clear()
    try:
        run_three_steps(tiny_audio_chat_dir, datasets_dir, tmp_path)
    finally:
        get_settings.cache_clear()


def run_three_steps(tiny_audio_chat_dir, datasets_dir, tmp_path):
    request = TrainingStartRequest(
        model_name=str(tiny_audio_chat_dir),
        local_datasets=[str(datasets_dir / "mllm_audio_demo.json")],
        training_type="full",
        max_steps=3,
        batch_size=2,
        learning_rate=1e-3,
    )
    events: queue.Queue = queue.Queue()
    phase, _ = train(request, "job-audio", tmp_path / "run", events, threading.Event())
    assert phase == "completed"
    sent = []
    while not events.empty():
        sent.append(events.get())
    data_line = next(
        payload for kind, payload in sent if kind == "info" and "details" in payload and "clips" in payload["details"]
    )
    assert data_line["details"]["audio_chat"] == "Qwen2-Audio" and data_line["details"]["clips"] == 3
    assert "Qwen2-Audio: 3 clips, 12.8 s in all (2.9 to 5.9 s), 25 tokens per second of audio" in data_line["message"]
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    before = load_file(tiny_audio_chat_dir / "model.safetensors")
    after = load_file(tmp_path / "run" / "model.safetensors")
    changed = [
        name for name, value in after.items() if name in before and not value.float().equal(before[name].float())
    ]
    assert any("audio_tower" in name for name in changed) and any("language_model" in name for name in changed)
    assert (
        json.loads((tmp_path / "run" / "processor_config.json").read_text())["processor_class"] == "Qwen2AudioProcessor"
    )
