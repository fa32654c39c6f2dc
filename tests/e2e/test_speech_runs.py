"""Whisper runs through the doors users drive (the real worker process): through the API, started on
the tiny Whisper with the shared clips (relative paths beside the data file), the language and task
set, stopped with a save after its second step and resumed from that checkpoint to its fourth, the
run history and metrics read as for any run; through the CLI, 3 steps with the audio settings in a
YAML config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import AUTH, TOKEN, ServerThread, allowed
from tests.support.speech_data import speech_file
from tests.support.train_api import start_job, wait_end, wait_step

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_a_whisper_run_stops_with_a_save_and_resumes_through_the_api(tmp_path, tiny_whisper_dir):
    from server import build_app
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    data = speech_file(tmp_path / "clips")
    settings = Settings(
        data_dir=tmp_path / "data", allowed_paths=allowed(data.parent, tiny_whisper_dir.parent), api_token=TOKEN
    )
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path))
    body = {
        "model_name": str(tiny_whisper_dir),
        "local_datasets": [str(data)],
        "language": "en",
        "task": "transcribe",
        "batch_size": 2,
        "max_seq_length": 64,
        "max_steps": 40,
        "save_steps": 2,
        "mixed_precision": "no",
    }
    with ServerThread(build_app(settings, runner)) as server:
        api = httpx.Client(base_url=server.url, headers=AUTH, timeout=60)
        checked = api.post("/api/train/preflight", json=body)
        assert checked.status_code == 200 and checked.json()["errors"] == [], checked.text
        assert checked.json()["vision"].startswith("Speech-to-text (Whisper): 4 clips")
        job = start_job(api, body)
        wait_step(api, 2)
        assert api.post("/api/train/stop", json={"save": True}).status_code == 200
        stopped = wait_end(api)
        assert stopped["phase"] == "stopped", stopped
        run_dir = Path(stopped["details"]["output_dir"])
        saved = sorted(run_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        assert saved and (saved[-1] / "adapter_model.safetensors").is_file()
        last = int(saved[-1].name.split("-")[1])
        resumed = {**body, "max_steps": last + 2, "resume_from_checkpoint": str(saved[-1])}
        assert start_job(api, resumed) == job  # the same run goes on
        ended = wait_end(api)
        assert ended["phase"] == "completed", ended["error"]
        assert ended["metric_history"]["steps"] == list(range(1, last + 3))
        runs = api.get("/api/train/runs").json()
        assert runs[0]["job_id"] == job and runs[0]["last_step"] == last + 2
        models = {m["id"]: m["serves"] for m in api.get("/v1/models").json()["data"]}
        assert models[job] == "transcriptions"
    assert {"adapter_config.json", "processor_config.json", "tokenizer.json"} <= {p.name for p in run_dir.iterdir()}
    assert json.loads((run_dir / "request.json").read_text())["language"] == "en"


def test_the_cli_trains_whisper_for_3_steps_with_the_audio_settings_from_yaml(tmp_path, tiny_whisper_dir):
    data = speech_file(tmp_path / "clips")
    config = tmp_path / "run.yaml"
    config.write_text("batch_size: 2\nmax_seq_length: 64\nlanguage: en\ntask: transcribe\nmax_audio_seconds: 10\n")
    out = tmp_path / "whisper-run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer_core",
            "train",
            "--model-name",
            str(tiny_whisper_dir),
            "--dataset",
            str(data),
            "--config",
            str(config),
            "--max-steps",
            "3",
            "--output-dir",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "completed" in result.stdout and "[training]" in result.stdout
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if s.get("loss") is not None] == [1, 2, 3]
    saved = json.loads((out / "request.json").read_text())
    assert (saved["language"], saved["max_audio_seconds"]) == ("en", 10)
    assert (out / "adapter_model.safetensors").is_file() and (out / "processor_config.json").is_file()
