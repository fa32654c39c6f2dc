"""Driving a training job over HTTP as a client does (``/api/train/start``, ``/status``), for the
tests of launched runs (torchrun, Ray)."""

from __future__ import annotations

import httpx

from tests.e2e.conftest import wait_for


def start_job(api: httpx.Client, body: dict) -> str:
    """Start ``body``; asserts it was queued; returns the job id."""
    started = api.post("/api/train/start", json=body)
    assert started.status_code == 200 and started.json()["status"] == "queued", started.text
    return started.json()["job_id"]


def wait_step(api: httpx.Client, min_step: int) -> dict:
    """The status once the job has logged step ``min_step`` (fails at once if it ended in error or
    stopped before that; 300 s at most)."""

    def reached() -> bool:
        status = api.get("/api/train/status").json()
        assert status["phase"] not in ("error", "stopped"), status["error"]
        return (status["details"].get("step") or 0) >= min_step

    wait_for(reached, 300, f"step {min_step}")
    return api.get("/api/train/status").json()


def wait_end(api: httpx.Client) -> dict:
    """The status once no job runs (300 s at most)."""
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 300, "the run's end")
    return api.get("/api/train/status").json()
