"""An audio-in chat run through the CLI, as a user types it: ``python -m trainer_core train`` trains 3
LoRA steps of the tiny Qwen2-Audio on ``mllm_audio_demo.json`` (the clips read from the files beside
it) and saves the adapter with the processor; ``export --format merged`` (run in this process) then
writes the merged model with its processor, an audio chat model again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_core.cli.main import main
from trainer_core.model_kind import kind_for_folder
from trainer_core.settings import get_settings

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_the_cli_trains_lora_steps_on_the_demo_clips_and_exports_them_merged(
    tiny_audio_chat_dir, datasets_dir, tmp_path, monkeypatch
):
    studio, merged = tmp_path / "studio", tmp_path / "exports" / "merged"
    env = dict(
        os.environ,
        STUDIO_DATA_DIR=str(studio),
        STUDIO_ALLOWED_PATHS=os.pathsep.join([str(datasets_dir), str(tiny_audio_chat_dir.parent), str(tmp_path)]),
    )
    flags = ["train", "--model-name", str(tiny_audio_chat_dir), "--dataset", str(datasets_dir / "mllm_audio_demo.json")]
    run = studio / "runs" / "cli-audio"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer_core",
            *flags,
            "--max-steps",
            "3",
            "--batch-size",
            "2",
            "--output-dir",
            str(run),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "completed: Training completed" in done.stdout + done.stderr
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3] and (run / "adapter_model.safetensors").is_file()
    assert json.loads((run / "processor_config.json").read_text())["processor_class"] == "Qwen2AudioProcessor"
    monkeypatch.setenv("STUDIO_DATA_DIR", env["STUDIO_DATA_DIR"])
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", env["STUDIO_ALLOWED_PATHS"])
    get_settings.cache_clear()
    try:
        assert main(["export", str(run), "--format", "merged", "--output", str(merged)]) == 0
    finally:
        get_settings.cache_clear()
    assert (merged / "model.safetensors").is_file() and kind_for_folder(merged).name == "audio_chat"
    assert json.loads((merged / "config.json").read_text())["architectures"] == ["Qwen2AudioForConditionalGeneration"]
