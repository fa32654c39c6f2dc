"""The studio stays the owner of a ``compute: ray`` job (a local Ray head, 2 workers, the tiny
SmolLM2, over HTTP as a client drives it): Stop (save) reaches both Ray Train workers, which save one
checkpoint at the same step; a Ray worker killed mid-run ends the run in error naming its rank, its
last checkpoint left resumable (copied back from the storage path), and Resume continues it; Cancel
ends the driver and both workers of the resumed run within seconds."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import psutil
import pytest

from tests.e2e.conftest import allowed, free_port
from tests.support.api_server import AppProcess
from tests.support.train_api import cancel_ends, kill_rank_1, start_job, wait_end, wait_step

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
pytest.importorskip("ray")
TOKEN = "test-ray-control-token-7d2e"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def app_proc(tmp_path_factory, datasets_dir, tiny_model_dir):
    folder = tmp_path_factory.mktemp("ray-app")
    (folder / "storage").mkdir()
    env = {
        "STUDIO_DATA_DIR": str(folder / "data"),
        "STUDIO_ALLOWED_PATHS": allowed(datasets_dir, tiny_model_dir.parent, folder / "storage"),
        "STUDIO_API_TOKEN": TOKEN,
    }
    proc = AppProcess(free_port(), env, folder / "app.log").start()
    proc.storage = folder / "storage"
    yield proc
    proc.stop()


def _body(ray_head: str, datasets_dir: Path, model: Path, **fields) -> dict:
    return {
        "model_name": str(model),
        "local_datasets": [str(datasets_dir / "alpaca_en_demo.json")],
        "batch_size": 2,
        "compute": "ray",
        "ray_address": ray_head,
        "num_workers": 2,
        "max_seq_length": 96,
        "max_steps": 2000,
        **fields,
    }


def test_stop_reaches_both_ray_workers_and_they_save_once(app_proc, ray_head, datasets_dir, tiny_model_dir):
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    start_job(api, _body(ray_head, datasets_dir, tiny_model_dir, max_steps=6))
    status = wait_step(api, 2)
    assert status["details"]["launcher"] == "Ray Train" and len(status["details"]["rank_pids"]) == 2
    assert api.post("/api/train/stop", json={"save": True}).status_code == 200
    stopped = wait_end(api)
    assert stopped["phase"] == "stopped" and stopped["details"]["end_reason"] == "stopped", stopped["error"]
    run_dir = Path(stopped["details"]["output_dir"])
    step = stopped["details"]["step"]
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == [f"checkpoint-{step}"]
    saved = run_dir / f"checkpoint-{step}"
    assert (saved / "rng_state_0.pth").is_file() and (saved / "rng_state_1.pth").is_file()  # both workers' parts
    assert (saved / "adapter_model.safetensors").is_file() and (saved / "optimizer.pt").is_file()
    # a Ray run's checkpoint resumed: test_a_killed_ray_worker_ends_the_run_in_error_its_checkpoint_resumes_and_cancel_ends_it


def test_a_killed_ray_worker_ends_the_run_in_error_its_checkpoint_resumes_and_cancel_ends_it(
    app_proc, ray_head, datasets_dir, tiny_model_dir
):
    """With a storage path (the workers in scratch folders, checkpoints reported through Ray Train):
    the driver copies the checkpoints reported before the kill into the run folder, and Resume
    stages that checkpoint and the earlier metrics for the workers: the resumed run logs the steps
    after it. Cancel then ends the driver and both workers within seconds. (What a completed run
    with a storage path copies back: tests/e2e/test_ray_runs.py.)"""
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    body = _body(ray_head, datasets_dir, tiny_model_dir, save_steps=2, ray_storage_path=str(app_proc.storage))
    start_job(api, body)
    rank1, ended = kill_rank_1(api, at_step=3)
    assert f"rank 1 (of 2, pid {rank1}) died on the Ray cluster" in ended["error"], ended["error"]
    assert "Ray Train ended the others" in ended["error"] and "can be resumed" in ended["error"]
    run_dir = Path(ended["details"]["output_dir"])
    saved = sorted(run_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert saved, "no checkpoint was left to resume"
    last = int(saved[-1].name.split("-")[1])

    assert start_job(api, {**body, "resume_from_checkpoint": str(saved[-1])})
    status = wait_step(api, last + 1)
    assert status["details"]["launcher"] == "Ray Train"
    workers = [psutil.Process(pid) for pid in status["details"]["rank_pids"]]
    driver = [p for p in psutil.Process(app_proc.process.pid).children() if "ray_driver" in " ".join(p.cmdline())]
    assert len(workers) == 2 and len(driver) == 1
    cancel_ends(api, workers + driver, within_s=5.0)
    again = api.get("/api/train/status").json()
    steps = again["metric_history"]["steps"]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= last + 1  # resumed after the checkpoint
    logged = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert logged[:last] == list(range(1, last + 1))  # the earlier steps kept (a cancelled run copies nothing back)
