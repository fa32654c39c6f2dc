"""DPO, ORPO and KTO end to end with the tiny SmolLM2 over HTTP against the real app process (what
DPO teaches the real model is measured by ``bench/preference.py``): each method trains on the shared ``dpo_en_demo.json`` and its metrics (rewards, margins,
accuracies; KL for KTO) reach the status, the metrics route, the SSE stream and the run history;
a wrong data / method pairing is a 400 naming the fix; a DPO run from an SFT run's adapter
continues that adapter, against the SFT model as its reference."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import httpx
import pytest
from safetensors.torch import load_file

from tests.e2e.conftest import wait_for
from tests.support.api_server import API_AUTH as AUTH
from tests.support.api_server import app_for, sse_events

pytestmark = pytest.mark.slow
SMALL = dict(
    batch_size=2,
    max_seq_length=256,
    dataset_slice_end=24,
    max_steps=2,
    learning_rate=5e-5,
    lr_scheduler_type="constant",
)


@pytest.fixture(scope="module")
def app_proc(api_app, tiny_model_dir):
    """The launched app the HTTP tests share (``api_app``; each test waits for its run's end);
    ``model`` is the tiny model, ``adapters`` a folder inside the allowed ones."""
    app = app_for(api_app, "preference")
    app.adapters, app.model = app.folder / "adapters", str(tiny_model_dir)
    app.adapters.mkdir()
    return app


def _train(api: httpx.Client, body: dict) -> dict:
    started = api.post("/api/train/start", json=body)
    assert started.status_code == 200 and started.json()["status"] == "queued", started.text
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 600, "the run's end")
    status = api.get("/api/train/status").json()
    assert status["phase"] == "completed", (status["message"], status["error"])
    return status


@pytest.mark.parametrize("method", ["dpo", "orpo", "kto"])
def test_each_method_trains_and_reports_its_metrics(app_proc, datasets_dir, method):
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    body = {
        "local_datasets": [str(datasets_dir / "dpo_en_demo.json")],
        "training_method": method,
        **SMALL,
        "model_name": app_proc.model,
    }
    status = _train(api, body)
    history = status["metric_history"]
    assert history["steps"] == [1, 2] and all(math.isfinite(v) for v in history["loss"])
    assert len(history["rewards_margins"]) == 2 and all(isinstance(v, float) for v in history["rewards_chosen"])
    if method == "kto":
        assert all(isinstance(v, float) for v in history["kl"])
    else:
        assert all(0.0 <= v <= 1.0 for v in history["rewards_accuracies"])
    if method == "dpo":  # the policy starts as its reference: no reward and loss ln 2 at step 1
        assert history["rewards_chosen"][0] == pytest.approx(0.0, abs=1e-6)
        assert history["loss"][0] == pytest.approx(math.log(2), abs=1e-4)
    assert (
        status["details"]["format"] == "preference"
        and status["details"]["rows"] == (48 if method == "kto" else 24) - status["details"]["dropped_rows"]
    )  # KTO: 24 pairs unpaired into 48 rows
    job_id = status["job_id"]
    metrics = api.get("/api/train/metrics").json()
    assert metrics["current"]["rewards_margins"] == history["rewards_margins"][-1]
    replay = [
        json.loads(e["data"]) for e in sse_events(api, {**AUTH, "Last-Event-ID": "0"}) if e.get("event") == "progress"
    ]
    assert [e["rewards_chosen"] for e in replay] == history["rewards_chosen"]
    run = api.get(f"/api/train/runs/{job_id}").json()
    assert run["request"]["training_method"] == method and run["request"]["beta"] == 0.1
    assert [e["rewards_margins"] for e in run["metrics"]] == history["rewards_margins"]  # the run history keeps them


def test_wrong_pairings_are_refused_naming_the_fix(app_proc, datasets_dir):
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    alpaca = {"local_datasets": [str(datasets_dir / "alpaca_en_demo.json")], **SMALL, "model_name": app_proc.model}
    refused = api.post("/api/train/start", json={**alpaca, "training_method": "dpo"})
    assert refused.status_code == 400 and "DPO needs pairs" in refused.text and "training_method 'sft'" in refused.text
    pairs = {**alpaca, "local_datasets": [str(datasets_dir / "dpo_en_demo.json")]}
    refused = api.post("/api/train/start", json=pairs)
    assert refused.status_code == 400 and "choose training_method dpo, orpo or kto" in refused.text
    refused = api.post("/api/train/start", json={**pairs, "training_method": "dpo", "packing": True})
    assert refused.status_code == 422 and "turn packing off" in refused.text
    outside = api.post("/api/train/start", json={**pairs, "training_method": "dpo", "adapter_name_or_path": "/etc"})
    assert outside.status_code == 400 and "adapter_name_or_path" in outside.text
    empty = app_proc.adapters / "empty"
    empty.mkdir()
    missing = api.post("/api/train/start", json={**pairs, "training_method": "dpo", "adapter_name_or_path": str(empty)})
    assert missing.status_code == 400 and "holds no LoRA adapter" in missing.text
    check = api.post("/api/train/preflight", json={**pairs, "training_method": "dpo"}).json()
    assert check["rows_read"] == 24 and check["files"][0]["format"] == "preference" and not check["errors"]


@pytest.mark.parametrize("method, training_type", [("dpo", "full"), ("kto", "qlora")])
def test_full_and_qlora_training(app_proc, datasets_dir, method, training_type):
    """Full DPO keeps a frozen copy of the model as its reference; QLoRA trains adapters on a 4-bit
    base (bitsandbytes on CPU)."""
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    body = {
        "local_datasets": [str(datasets_dir / "dpo_en_demo.json")],
        "training_method": method,
        "training_type": training_type,
        **SMALL,
        "model_name": app_proc.model,
        "max_steps": 1,
        "learning_rate": 1e-6,
    }
    status = _train(api, body)
    assert status["metric_history"]["steps"] == [1] and math.isfinite(status["metric_history"]["loss"][0])
    files = {p.name for p in Path(status["details"]["output_dir"]).iterdir()}
    assert ("model.safetensors" in files) == (training_type == "full")
    assert ("adapter_model.safetensors" in files) == (training_type != "full")


def test_dpo_from_an_sft_adapter_continues_it(app_proc, datasets_dir, tiny_trained_run):
    sft = app_proc.adapters / "sft"
    shutil.copytree(tiny_trained_run.output_dir, sft, ignore=shutil.ignore_patterns("checkpoint-*"))
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    body = {
        "local_datasets": [str(datasets_dir / "dpo_en_demo.json")],
        "training_method": "dpo",
        "adapter_name_or_path": str(sft),
        **SMALL,
        "model_name": app_proc.model,
        "max_steps": 1,
    }
    status = _train(api, body)
    history = status["metric_history"]
    # the reference is the SFT model itself (not the base): the policy equals it at step 1
    assert history["rewards_chosen"][0] == pytest.approx(0.0, abs=1e-6)
    before = load_file(str(sft / "adapter_model.safetensors"))
    after = load_file(str(Path(status["details"]["output_dir"]) / "adapter_model.safetensors"))
    assert before.keys() == after.keys()
    for name, weight in before.items():  # one small step from the SFT adapter, not a fresh adapter
        assert (after[name] - weight).norm() < 0.05 * weight.norm(), name
