"""GRPO over HTTP against the real app process (the one the HTTP tests share, started with the
reward-code switch): the tiny SmolLM2 trains 3 steps on arithmetic prompts and every step logs its rewards (each
function apart), its completions and KL to the status, the SSE stream and the run history (the run's
plumbing is the point, not what a random model earns: what GRPO teaches the real model is measured
by ``bench/grpo.py --learn``, docs/BENCHMARKS.md); reward code is refused by a server without the
switch (raw HTTP to the app built in this process: the refusal comes before any worker; also from
outside the allowed folders) and used by the one with it."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from bench.arith_prompts import write_rows
from tests.e2e.conftest import ServerThread, allowed, wait_for
from tests.support.api_server import API_AUTH as AUTH
from tests.support.api_server import API_TOKEN as TOKEN
from tests.support.api_server import app_for, sse_events

pytestmark = pytest.mark.slow
REWARD_CODE = """
def says_a_number(prompts, completions, completion_ids=None, **kwargs):
    text = [c if isinstance(c, str) else c[0]["content"] for c in completions]
    return [1.0 if any(ch.isdigit() for ch in t) else 0.0 for t in text]
"""


@pytest.fixture(scope="module")
def app(api_app):
    """The launched app the HTTP tests share (``api_app``: reward code allowed; each test waits for
    its run's end) and this module's folder in it."""
    return app_for(api_app, "grpo")


@contextmanager
def _closed_app(folder: Path, model_dir: Path) -> Iterator[str]:
    """The app without the reward-code switch, built in this process over a worker that only steps
    (nothing here trains: every request is refused at admission); yields its URL."""
    from server import build_app
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    settings = Settings(data_dir=folder / "closed", allowed_paths=allowed(folder, model_dir.parent), api_token=TOKEN)
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker,
        runs_dir=settings.runs_dir,
        store=RunStore(settings.db_path),
        warm_modules=(),
    )
    with ServerThread(build_app(settings, runner)) as server:
        yield server.url.rstrip("/")


def _finish(api: httpx.Client, body: dict) -> dict:
    started = api.post("/api/train/start", json=body)
    assert started.status_code == 200 and started.json()["status"] == "queued", started.text
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 900, "the run's end")
    status = api.get("/api/train/status").json()
    assert status["phase"] == "completed", (status["message"], status["error"])
    return status


def test_a_grpo_run_logs_its_rewards_every_step(app, tiny_model_dir):
    data = write_rows(app.folder / "arith.json", count=40)
    api = httpx.Client(base_url=app.url, headers=AUTH, timeout=30)
    body = {
        "model_name": str(tiny_model_dir),
        "local_datasets": [str(data)],
        "training_method": "grpo",
        "max_steps": 3,
        "batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 12,
        "rewards": ["numeric_match column=answer", "length target_length=6 weight=0.5"],
    }
    status = _finish(api, body)
    history = status["metric_history"]
    assert history["steps"] == [1, 2, 3] and all(math.isfinite(v) for v in history["loss"])
    assert set(history["rewards"]) == {"numeric_match:answer", "length"}
    assert all(0.0 <= v <= 1.0 for v in history["rewards"]["numeric_match:answer"])
    for step in range(3):  # the weighted reward is the weighted sum of the functions' means
        parts = history["rewards"]["numeric_match:answer"][step] + 0.5 * history["rewards"]["length"][step]
        assert history["reward"][step] == pytest.approx(parts, abs=1e-5)
    assert all(0 < v <= 12 for v in history["completion_length"]) and all(v >= 0 for v in history["kl"])
    assert history["kl"][0] == pytest.approx(0.0, abs=1e-6)  # the policy starts as its reference
    samples = history["samples"]
    assert len(samples) == 4 and all(s["prompt"].startswith("What is") for s in samples)
    assert all(set(s["rewards"]) == {"numeric_match:answer", "length"} for s in samples)
    replay = [
        json.loads(e["data"]) for e in sse_events(api, {**AUTH, "Last-Event-ID": "0"}) if e.get("event") == "progress"
    ]
    assert [e["reward"] for e in replay] == history["reward"] and all(e["samples"] for e in replay)
    run = api.get(f"/api/train/runs/{status['job_id']}").json()
    assert run["request"]["training_method"] == "grpo" and run["request"]["beta"] == 0.04
    assert [e["rewards"] for e in run["metrics"]] == [
        {name: values[i] for name, values in history["rewards"].items()} for i in range(3)
    ]


def test_reward_code_needs_the_servers_switch(app, tiny_model_dir, tmp_path):
    data = write_rows(app.folder / "arith16.json", count=16)
    code = app.folder / "my_rewards.py"
    code.write_text(REWARD_CODE)
    outside = tmp_path / "my_rewards.py"  # outside every allowed folder
    outside.write_text(REWARD_CODE)
    body = {
        "model_name": str(tiny_model_dir),
        "local_datasets": [str(data)],
        "training_method": "grpo",
        "max_steps": 2,
        "max_completion_length": 4,
        "reward_file": str(code),
        "rewards": ["code function=says_a_number", "numeric_match weight=2"],
    }
    with _closed_app(app.folder, tiny_model_dir) as url:
        api = httpx.Client(base_url=url, headers=AUTH, timeout=30)
        for route in ("/api/train/start", "/api/train/preflight"):
            refused = api.post(route, json=body)
            assert refused.status_code == 400 and "STUDIO_ALLOW_REWARD_CODE=1" in refused.text, refused.text
        sneaky = api.post("/api/train/start", json={**body, "reward_file": str(outside)})
        assert sneaky.status_code == 400 and "reward_file" in sneaky.text and "allowed" in sneaky.text
        no_file = {k: v for k, v in body.items() if k != "reward_file"} | {"rewards": ["code function=x"]}
        missing = api.post("/api/train/start", json=no_file)
        assert missing.status_code == 400 and "needs reward_file" in missing.text
        assert api.get("/api/train/status").json()["phase"] == "idle"  # nothing started
    api = httpx.Client(base_url=app.url, headers=AUTH, timeout=30)
    sneaky = api.post("/api/train/start", json={**body, "reward_file": str(outside)})
    assert sneaky.status_code == 400 and "reward_file" in sneaky.text  # the switch opens no other folder
    unknown = api.post("/api/train/start", json={**body, "rewards": ["code function=nope"]})
    assert unknown.status_code == 400 and "has no function 'nope'" in unknown.text
    history = _finish(api, body)["metric_history"]
    assert history["steps"] == [1, 2] and set(history["rewards"]) == {"says_a_number", "numeric_match:answer"}
