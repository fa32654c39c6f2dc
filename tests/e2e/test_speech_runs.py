"""Whisper runs through the doors users drive (the real worker process): through the API, started on
the tiny Whisper with the shared clips (relative paths beside the data file), the language and task
set, stopped with a save after its second step and resumed from that checkpoint to its fourth, the
run history and metrics read as for any run; through the CLI, the audio settings in a YAML config
admitted as the request of a Whisper run."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import AUTH, TOKEN, ServerThread, allowed
from tests.support.speech_data import speech_file
from tests.support.train_api import start_job, wait_end, wait_step

pytestmark = pytest.mark.slow


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


def test_the_cli_admits_whisper_with_the_audio_settings_from_yaml(tmp_path, tiny_whisper_dir):
    """The CLI's ``train`` up to the start (its parser, the YAML config under the flags, then the
    admission every door runs: the clips read and checked in the check's worker process): the
    request it would hand the ``JobRunner`` is a Whisper run with the YAML's audio settings. What
    the runner does with such a request is the API test's above (the same ``JobRunner.start``);
    the CLI's own start, follow and exit code on a real worker run are ``test_cli.py``'s (text) and
    ``test_audio_chat_cli.py``'s (an audio kind's clips read from the files beside the data)."""
    from trainer_core.cli.main import build_parser
    from trainer_core.cli.train import checked_args
    from trainer_core.model_kind import kind_for_folder

    data = speech_file(tmp_path / "clips")
    config = tmp_path / "run.yaml"
    config.write_text("batch_size: 2\nmax_seq_length: 64\nlanguage: en\ntask: transcribe\nmax_audio_seconds: 10\n")
    out = tmp_path / "whisper-run"
    flags = ["--model-name", str(tiny_whisper_dir), "--dataset", str(data), "--config", str(config)]
    args = build_parser().parse_args(["train", *flags, "--max-steps", "3", "--output-dir", str(out)])
    request = checked_args(args)
    assert not isinstance(request, int), f"the CLI refused it (exit code {request})"
    assert kind_for_folder(Path(request.model_name)).name == "speech_to_text"
    assert (request.language, request.task, request.max_audio_seconds) == ("en", "transcribe", 10)
    assert (request.batch_size, request.max_seq_length, request.max_steps) == (2, 64, 3)  # flags and YAML together
    assert request.local_datasets == [str(data)] and Path(request.output_dir) == out
