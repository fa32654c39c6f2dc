"""run.json: what it records (request without the token, resolved TRL / PEFT configs, dataset
fingerprints, versions, hardware, times, metrics), how the job runner completes it however a job
ends, the download bundle, the rerun values, and the best checkpoint / eval loss in the history."""

from __future__ import annotations

import enum
import hashlib
import json
import sqlite3
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support import fake_workers
from trainer_core.runs.bundle import BundleError, run_bundle
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import TrainingProgress
from trainer_core.training.config import build_lora_config, build_sft_config
from trainer_core.training.manifest import (
    RUN_JSON,
    ManifestError,
    begin_manifest,
    final_metrics,
    finish_manifest,
    json_safe,
    read_manifest,
    rerun_values,
)
from trainer_core.training.worker import EventKind
from trainer_core.vocabulary import EndReason, Phase

SECRET = "hf_abcdefghijklmnopqrstuvwxyz123456"
ROWS = [{"instruction": f"Say {i}", "input": "", "output": f"{i}"} for i in range(7)]


def early_stopping_worker(request, job_id, output_dir, events, stop):
    """Logs a train step and two evaluations, then ends as early stopping ends a run."""
    for step, fields in (
        (1, {"loss": 2.0, "num_tokens": 40, "elapsed_seconds": 1.5}),
        (1, {"eval_loss": 1.9}),
        (2, {"loss": 1.8, "num_tokens": 80, "elapsed_seconds": 3.0}),
        (2, {"eval_loss": 1.95}),
    ):
        events.put(
            (EventKind.PROGRESS, TrainingProgress(job_id=job_id, step=step, total_steps=9, **fields).model_dump())
        )
    reason = (
        "Stopped early at step 2: eval_loss did not improve by more than 0.0 for 1 evaluations (best 1.9000 at step 1)"
    )
    events.put(
        (
            EventKind.DONE,
            {
                "phase": "completed",
                "message": f"{reason}; best weights saved in {output_dir}",
                "output_dir": output_dir,
                "stop_reason": reason,
            },
        )
    )


@pytest.fixture
def data_file(tmp_path) -> Path:
    path = tmp_path / "data" / "alpaca.json"
    path.parent.mkdir()
    path.write_text(json.dumps(ROWS))
    return path


def _request(data_file: Path, **fields) -> TrainingStartRequest:
    return TrainingStartRequest(local_datasets=[str(data_file)], hf_token=SECRET, max_steps=3, **fields)


def test_json_safe_turns_configs_into_plain_json():
    class Kind(enum.Enum):
        lora = "LORA"

    value = {"targets": {"v_proj", "q_proj"}, "kind": Kind.lora, "path": Path("/x"), 1: (1, 2.5, None, True)}
    assert json_safe(value) == {
        "targets": ["q_proj", "v_proj"],
        "kind": "LORA",
        "path": "/x",
        "1": [1, 2.5, None, True],
    }


def test_begin_records_request_configs_data_versions_and_hardware(tmp_path, data_file):
    request = _request(data_file, lora_r=8)
    out = tmp_path / "run"
    out.mkdir()
    args = build_sft_config(request, out, "cpu", has_eval=False)
    from transformers import AutoModelForCausalLM

    from tests.support.families import family_config

    model = AutoModelForCausalLM.from_config(family_config("phi3"))  # fused projections
    structure = {"attention": "sdpa_varlen", "padding_free": True, "adapted": {"modules": ["self_attn.qkv_proj"]}}
    begin_manifest(out, request, "job_1", args, build_lora_config(request, model), structure, "You are Ada.")
    text = (out / RUN_JSON).read_text()
    assert SECRET not in text and "hf_token" not in json.loads(text)["request"]
    data = read_manifest(out)
    assert data["request"] == request.public_dict() and data["seed"] == 42 and data["job_id"] == "job_1"
    assert data["sft_config"]["max_steps"] == 3 and data["sft_config"]["seed"] == 42
    assert data["sft_config"]["hub_token"] == "<HUB_TOKEN>"  # transformers masks every *_token value
    assert data["lora_config"]["r"] == 8
    assert data["lora_config"]["target_modules"] == (
        r"^model\.layers\.\d+\.(?:self_attn\.o_proj|self_attn\.qkv_proj|mlp\.gate_up_proj|mlp\.down_proj)$"
    )
    assert data["model_structure"] == structure and data["system_message"] == "You are Ada."
    assert data["datasets"] == [
        {
            "role": "train",
            "path": str(data_file),
            "rows": 7,
            "format": "alpaca",
            "sha256": hashlib.sha256(data_file.read_bytes()).hexdigest(),
            "size_bytes": data_file.stat().st_size,
        }
    ]
    assert set(data["packages"]) == {
        "python",
        "torch",
        "transformers",
        "trl",
        "peft",
        "datasets",
        "gradio",
        "bitsandbytes",
    }
    assert data["packages"]["torch"] and data["packages"]["python"].count(".") == 2
    assert (
        data["hardware"]["cpu_cores"] >= 1
        and data["hardware"]["ram_gib"] > 0
        and isinstance(data["hardware"]["gpus"], list)
    )
    started = datetime.fromisoformat(data["started_at"])
    assert started.tzinfo == UTC and abs((datetime.now(UTC) - started).total_seconds()) < 60
    assert data["ended_at"] is None and data["end_reason"] is None
    assert not [p.name for p in out.iterdir() if p.name != RUN_JSON]  # no temporary file left


def test_a_resumed_run_updates_its_file_and_keeps_its_start(tmp_path, data_file):
    out = tmp_path / "run"
    out.mkdir()
    first = begin_manifest(out, _request(data_file), "job_1", tool_format="fallback")
    assert first["tool_format"] == "fallback"  # how the rows' tools were rendered (data.tool_rows)
    resumed = begin_manifest(out, _request(data_file, resume_from_checkpoint=str(out / "checkpoint-2")), "job_1")
    assert resumed["started_at"] == first["started_at"]
    assert [s["resume_from_checkpoint"] for s in resumed["sessions"]] == [None, str(out / "checkpoint-2")]


def test_final_metrics_summarise_train_and_eval_steps():
    events = [
        TrainingProgress(job_id="j", step=1, total_steps=4, loss=2.0, num_tokens=50, elapsed_seconds=1.0),
        TrainingProgress(job_id="j", step=2, total_steps=4, eval_loss=1.7),
        TrainingProgress(job_id="j", step=2, total_steps=4, loss=1.5, num_tokens=100, elapsed_seconds=2.5),
        TrainingProgress(job_id="j", step=4, total_steps=4, eval_loss=1.8),
    ]
    assert final_metrics(events) == {
        "final_loss": 1.5,
        "best_eval_loss": 1.7,
        "best_eval_step": 2,
        "last_eval_loss": 1.8,
        "steps": 4,
        "total_steps": 4,
        "tokens_seen": 100,
        "training_seconds": 2.5,
    }
    assert final_metrics([])["final_loss"] is None and final_metrics([])["steps"] == 0


def test_finish_writes_a_shorter_file_when_the_worker_wrote_none(tmp_path, data_file):
    out = tmp_path / "run"
    out.mkdir()
    data = finish_manifest(out, _request(data_file), "job_1", "error", [])
    assert data["end_reason"] == "error" and data["sft_config"] is None and data["datasets"][0]["rows"] is None
    assert data["datasets"][0]["sha256"] == hashlib.sha256(data_file.read_bytes()).hexdigest()
    assert datetime.fromisoformat(data["ended_at"]) >= datetime.fromisoformat(data["started_at"])


@pytest.mark.parametrize(
    "worker, phase, reason",
    [
        (fake_workers.pid_worker, Phase.completed, "completed"),
        (fake_workers.dying_worker, Phase.error, "error"),
        (early_stopping_worker, Phase.completed, "early_stopped"),
    ],
)
def test_the_job_runner_completes_run_json_however_the_job_ends(tmp_path, data_file, worker, phase, reason):
    store = RunStore(tmp_path / "studio.db")
    runner = JobRunner(worker_target=worker, runs_dir=tmp_path / "runs", store=store, warm_modules=())
    response = runner.start(_request(data_file))
    assert runner.wait(60)
    status = runner.status()
    assert status.phase == phase and status.details["end_reason"] == reason
    data = read_manifest(tmp_path / "runs" / response.job_id)
    assert data["end_reason"] == reason and data["ended_at"] and data["job_id"] == response.job_id
    marker = json.loads((tmp_path / "runs" / response.job_id / ".finetune-studio-run.json").read_text())
    assert RUN_JSON in marker["files"]  # Delete removes it with the run
    record = store.get_run(response.job_id)
    assert record.end_reason == EndReason(reason)
    if reason == "early_stopped":
        assert status.details["stop_reason"].startswith("Stopped early at step 2")
        assert status.message.startswith(status.details["stop_reason"])
        assert status.details["best_eval_loss"] == record.best_eval_loss == 1.9
        assert data["final_metrics"]["final_loss"] == 1.8 and data["final_metrics"]["tokens_seen"] == 80


def test_a_cancelled_job_gets_run_json_too(tmp_path, data_file):
    runner = JobRunner(worker_target=fake_workers.stubborn_worker, runs_dir=tmp_path / "runs", warm_modules=())
    response = runner.start(_request(data_file))
    runner.stop(save=False)
    assert runner.wait(30)
    assert read_manifest(tmp_path / "runs" / response.job_id)["end_reason"] == "cancelled"


def test_the_bundle_holds_run_json_and_the_final_weights_only(tmp_path, data_file):
    out = tmp_path / "run"
    (out / "checkpoint-1").mkdir(parents=True)
    for name in (
        "adapter_model.safetensors",
        "adapter_config.json",
        "tokenizer.json",
        "metrics.jsonl",
        "worker.log",
        ".finetune-studio-run.json",
        "checkpoint-1/adapter_model.safetensors",
    ):
        (out / name).write_text(name)
    with pytest.raises(BundleError, match=r"has no run\.json: it is not a run folder"):
        run_bundle(out, tmp_path / "downloads")
    begin_manifest(out, _request(data_file), "job_1")
    archive = run_bundle(out, tmp_path / "downloads")
    assert archive == tmp_path / "downloads" / "run.zip"
    with zipfile.ZipFile(archive) as zf:
        assert zf.namelist() == [
            "run.json",
            "adapter_config.json",
            "adapter_model.safetensors",
            "metrics.jsonl",
            "tokenizer.json",
        ]
        assert json.loads(zf.read("run.json"))["job_id"] == "job_1"
        assert zf.getinfo("adapter_model.safetensors").compress_type == zipfile.ZIP_STORED
    assert [p.name for p in (tmp_path / "downloads").iterdir()] == ["run.zip"]


def test_rerun_values_leave_the_folder_and_warn_on_changed_or_missing_data(tmp_path, data_file):
    out = tmp_path / "run"
    out.mkdir()
    other = data_file.parent / "other.json"
    other.write_text(json.dumps(ROWS))
    request = TrainingStartRequest(local_datasets=[str(data_file), str(other)], output_dir=str(out), max_steps=3)
    begin_manifest(out, request, "job_1")
    values, warnings = rerun_values(out / RUN_JSON)
    assert (
        warnings == []
        and values["max_steps"] == 3
        and "output_dir" not in values
        and "resume_from_checkpoint" not in values
    )
    data_file.write_text(json.dumps(ROWS[:3]))
    other.unlink()
    _, warnings = rerun_values(out / RUN_JSON)
    assert len(warnings) == 2
    assert f"dataset file {data_file} changed since the run: its sha256 differs" in warnings[0]
    assert f"dataset file {other} is missing" in warnings[1]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ManifestError, match="has no 'request' settings"):
        rerun_values(tmp_path / "bad.json")
    with pytest.raises(ManifestError, match="does not exist"):
        rerun_values(tmp_path / "nothing.json")


def test_best_checkpoint_columns_are_added_to_an_older_history(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE runs (job_id TEXT PRIMARY KEY, created_at REAL NOT NULL, finished_at REAL, phase TEXT "
            "NOT NULL, request_json TEXT NOT NULL, output_dir TEXT NOT NULL, last_checkpoint TEXT, final_loss REAL, "
            "total_steps INTEGER, last_step INTEGER NOT NULL DEFAULT 0, error TEXT)"
        )
        db.execute(
            "INSERT INTO runs (job_id, created_at, phase, request_json, output_dir) VALUES ('old', 1, 'completed', '{}', '/x')"
        )
    store = RunStore(path)
    assert store.get_run("old").best_checkpoint is None and store.get_run("old").best_eval_loss is None
    store.create_run("new", {}, "/y", "training")
    store.finish_run("new", "completed", None, "/y/checkpoint-3", "early_stopped", "/y/checkpoint-1", 1.25)
    record = store.get_run("new")
    assert (record.best_checkpoint, record.best_eval_loss, record.end_reason) == (
        "/y/checkpoint-1",
        1.25,
        EndReason.early_stopped,
    )
