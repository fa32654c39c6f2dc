"""The job queue across an app crash, on the real app process with the tiny model: three jobs queued
through the API; the app is SIGKILLed while job 1 trains (before job 2 started); after a restart
job 1 is ``interrupted`` and not rerun, and jobs 2 and 3 run back to back to completion."""

from __future__ import annotations

import signal

import httpx
import pytest

from tests.e2e.conftest import allowed, free_port, wait_for
from tests.support.api_server import AppProcess

pytestmark = pytest.mark.slow
TOKEN = "test-queue-token-77c1"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SMALL = dict(batch_size=2, max_seq_length=128, dataset_slice_end=16, lr_scheduler_type="linear", max_steps=2)


def test_queued_jobs_survive_a_kill_between_jobs_1_and_2(tmp_path, datasets_dir, tiny_model_dir):
    env = {
        "STUDIO_DATA_DIR": str(tmp_path / "data"),
        "STUDIO_ALLOWED_PATHS": allowed(datasets_dir, tiny_model_dir.parent),
        "STUDIO_API_TOKEN": TOKEN,
    }
    port = free_port()
    proc = AppProcess(port, env, tmp_path / "app.log").start()
    try:
        api = httpx.Client(base_url=proc.url, headers=AUTH, timeout=60)
        body = {
            "local_datasets": [str(datasets_dir / "alpaca_en_demo.json")],
            "model_name": str(tiny_model_dir),
            **SMALL,
        }
        long_first = {1e-4: {"max_steps": 100}}  # job 1 trains for seconds: the crash finds it training
        queued = [
            api.post("/api/train/queue", json={**body, "learning_rate": lr, **long_first.get(lr, {})})
            for lr in (1e-4, 2e-4, 3e-4)
        ]
        assert all(q.status_code == 200 for q in queued), [q.text for q in queued]
        wait_for(lambda: api.get("/api/train/status").json()["phase"] == "training", 180, "job 1 training")
        workers = proc.workers()
        for worker in workers:  # frozen, so the crash lands while job 1 trains
            worker.send_signal(signal.SIGSTOP)
        first = api.get("/api/train/status").json()["job_id"]
        assert [e["request"]["learning_rate"] for e in api.get("/api/train/queue").json()] == [2e-4, 3e-4]
        proc.kill()
        for worker in workers:  # thawed: it finds its app gone and exits
            worker.send_signal(signal.SIGCONT)
        proc.start()
        api = httpx.Client(base_url=proc.url, headers=AUTH, timeout=60)
        wait_for(
            lambda: (
                api.get("/api/train/queue").json() == []
                and not api.get("/api/train/status").json()["is_training_running"]
            ),
            300,
            "jobs 2 and 3",
        )
        runs = list(reversed(api.get("/api/train/runs").json()))
        assert [(r["request"]["learning_rate"], r["phase"]) for r in runs] == [
            (1e-4, "interrupted"),
            (2e-4, "completed"),
            (3e-4, "completed"),
        ]  # job 1 was not rerun
        assert runs[0]["job_id"] == first
        gap = runs[2]["created_at"] - runs[1]["finished_at"]
        first_step = api.get(f"/api/train/runs/{runs[2]['job_id']}").json()["metrics"][0]["elapsed_seconds"]
        print(f"gap between jobs 2 and 3: {gap:.2f} s; job 3 trained its first step {first_step:.2f} s into training")
        assert 0 <= gap < 10.0  # the checks and the hand-over only: the next worker was importing meanwhile
    finally:
        proc.stop()
