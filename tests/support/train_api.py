"""Driving a training job over HTTP as a client does (``/api/train/start``, ``/status``, ``/stop``),
for the tests of launched runs (torchrun, Ray)."""

from __future__ import annotations

import os
import signal
import time

import httpx
import psutil

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


def kill_rank_1(api: httpx.Client, at_step: int) -> tuple[int, dict]:
    """SIGKILL rank 1 of the running job once it has logged ``at_step``; asserts the run then ends in
    error (end reason "error") and rank 0 was ended too. Returns (rank 1's pid, the final status)."""
    status = wait_step(api, at_step)
    rank0, rank1 = status["details"]["rank_pids"][:2]
    os.kill(rank1, signal.SIGKILL)
    ended = wait_end(api)
    assert ended["phase"] == "error" and ended["details"]["end_reason"] == "error", ended["error"]
    assert not psutil.pid_exists(rank0)  # rank 0 was ended too
    return rank1, ended


def cancel_ends(api: httpx.Client, processes: list[psutil.Process], within_s: float) -> None:
    """Cancel the running job (Stop without saving): every one of ``processes`` must be gone within
    ``within_s`` seconds of the request, and the run end "stopped" with end reason "cancelled"."""
    began = time.monotonic()
    assert api.post("/api/train/stop", json={"save": False}).status_code == 200
    _, alive = psutil.wait_procs(processes, timeout=within_s + 5)
    took = time.monotonic() - began
    assert not alive and took <= within_s, took
    ended = wait_end(api)
    assert ended["phase"] == "stopped" and ended["details"]["end_reason"] == "cancelled"
