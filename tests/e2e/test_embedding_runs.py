"""An embedding run through the API as a user's script drives it (raw HTTP, the real worker
process): started with ``is_embedding`` on the tiny encoder, stopped with a save after its second
step, resumed from that checkpoint to its last step; the run history, its metrics file and the
status's IR metrics read as for any run."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import AUTH, TOKEN, ServerThread, allowed
from tests.support.train_api import start_job, wait_end, wait_step

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_an_embedding_run_stops_with_a_save_and_resumes_through_the_api(tmp_path, datasets_dir, tiny_encoder_dir):
    from server import build_app
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    settings = Settings(
        data_dir=tmp_path / "data", allowed_paths=allowed(datasets_dir, tiny_encoder_dir.parent), api_token=TOKEN
    )
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path))
    body = {
        "model_name": str(tiny_encoder_dir),
        "local_datasets": [str(datasets_dir / "alpaca_en_demo.json")],
        "is_embedding": True,
        "embedding_columns": {"anchor": "instruction", "positive": "output"},
        "dataset_slice_end": 400,
        "batch_size": 4,
        "max_seq_length": 48,
        "max_steps": 40,
        "save_steps": 2,
        "val_size": 0.1,
        "eval_steps": 2,
        "mixed_precision": "no",
    }
    with ServerThread(build_app(settings, runner)) as server:
        api = httpx.Client(base_url=server.url, headers=AUTH, timeout=60)
        job = start_job(api, body)
        wait_step(api, 2)
        assert api.post("/api/train/stop", json={"save": True}).status_code == 200
        stopped = wait_end(api)
        assert stopped["phase"] == "stopped" and stopped["details"]["end_reason"] == "stopped", stopped
        run_dir = Path(stopped["details"]["output_dir"])
        saved = sorted(run_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        assert saved and (saved[-1] / "adapter_model.safetensors").is_file()  # a LoRA checkpoint of the embedder
        last = int(saved[-1].name.split("-")[1])
        resumed = {**body, "max_steps": last + 2, "resume_from_checkpoint": str(saved[-1])}
        assert start_job(api, resumed) == job  # the same run goes on
        ended = wait_end(api)
        assert ended["phase"] == "completed", ended["error"]
        assert ended["metric_history"]["steps"] == list(range(1, last + 3))
        runs = api.get("/api/train/runs").json()
        assert runs[0]["job_id"] == job and runs[0]["phase"] == "completed" and runs[0]["last_step"] == last + 2
        metrics = api.get(f"/api/train/runs/{job}").json()["metrics"]
        assert [m["step"] for m in metrics if m.get("loss") is not None] == list(range(1, last + 3))
        scored = [m for m in metrics if m.get("eval_ndcg_at_10") is not None]
        assert scored and all(0.0 <= m["eval_ndcg_at_10"] <= 1.0 for m in scored), scored
    logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if r.get("loss") is not None] == list(range(1, last + 3))
    assert any(r.get("eval_recall_at_10") is not None for r in logged)
    assert {"modules.json", "adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in run_dir.iterdir()}
