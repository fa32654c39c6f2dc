"""The training API over HTTP against the real app process: start / status / stop / reset / metrics,
SSE with heartbeat and replay, run history across a crash and resume, auth, path confinement; the
page's login (on the app built in this process)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ServerThread, allowed, free_port, wait_for
from tests.support.api_server import AppProcess, sse_events
from tests.support.audit.audit_hook import audit_env, read_events, touched_inside, touched_outside

pytestmark = pytest.mark.slow
TOKEN = "test-api-token-5f2c9a"
HF_TOKEN = "hf_NeverStoreThisToken123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SMALL = dict(batch_size=2, max_seq_length=128, dataset_slice_end=32, lr_scheduler_type="linear")
STEPS = 40  # the tiny model: about 3 s of training, long enough to be seen running


def _app(folder: Path, datasets_dir: Path, tiny_model_dir: Path) -> AppProcess:
    """The app with its data in ``folder / "data"``, its log in ``folder / "app.log"`` and the audit
    hook (``tests/support/audit``) logging every file change of the app and its workers to ``folder /
    "audit.jsonl"``."""
    env = {
        "STUDIO_DATA_DIR": str(folder / "data"),
        "STUDIO_ALLOWED_PATHS": allowed(datasets_dir, tiny_model_dir.parent),
        "STUDIO_API_TOKEN": TOKEN,
        "STUDIO_SSE_HEARTBEAT_S": "2",
        **audit_env(folder / "audit.jsonl"),
    }
    proc = AppProcess(free_port(), env, folder / "app.log").start()
    proc.model, proc.folder = str(tiny_model_dir), folder
    return proc


@pytest.fixture(scope="module")
def app_proc(tmp_path_factory, datasets_dir, tiny_model_dir):
    """One app for the tests that leave it running (each waits for its run's end); the last of
    them stops it and looks for the secrets in everything it wrote."""
    proc = _app(tmp_path_factory.mktemp("api-app"), datasets_dir, tiny_model_dir)
    yield proc
    proc.stop()


@pytest.fixture
def own_app(tmp_path, datasets_dir, tiny_model_dir):
    """An app of the test's own, for a test that kills and restarts it."""
    proc = _app(tmp_path, datasets_dir, tiny_model_dir)
    yield proc
    proc.stop()


def _client(proc: AppProcess) -> httpx.Client:
    return httpx.Client(base_url=proc.url, headers=AUTH, timeout=30)


def _body(datasets_dir: Path, **fields) -> dict:
    return {"local_datasets": [str(datasets_dir / "alpaca_en_demo.json")], **SMALL, **fields}


def _tiny(proc: AppProcess, datasets_dir: Path, **fields) -> dict:
    """A request for the tiny model (about 14 steps a second here)."""
    return _body(datasets_dir, model_name=proc.model, **fields)


def _wait_step(api: httpx.Client, step: int, timeout_s: float = 240) -> dict:
    wait_for(
        lambda: (api.get("/api/train/status").json()["details"].get("step") or 0) >= step, timeout_s, f"step {step}"
    )
    return api.get("/api/train/status").json()


def test_start_status_metrics_stop_reset_and_history(app_proc, datasets_dir):
    api = _client(app_proc)
    started = api.post(
        "/api/train/start", json=_tiny(app_proc, datasets_dir, max_steps=STEPS, hf_token=HF_TOKEN)
    ).json()
    assert started["status"] == "queued" and started["job_id"].startswith("job_")
    again = api.post("/api/train/start", json=_tiny(app_proc, datasets_dir, max_steps=STEPS)).json()
    assert again["status"] == "error" and "already in progress" in again["message"]
    assert api.post("/api/train/reset").status_code == 409
    status = _wait_step(api, 2)
    assert status["is_training_running"] and status["phase"] == "training"
    assert status["details"]["output_dir"] and status["details"]["total_steps"] == STEPS
    assert status["metric_history"]["steps"][:2] == [1, 2]
    metrics = api.get("/api/train/metrics").json()
    assert metrics["job_id"] == started["job_id"] and metrics["current"]["step"] >= 2
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 240, "completion")
    final = api.get("/api/train/status").json()
    assert final["phase"] == "completed" and final["details"]["step"] == STEPS
    assert api.post("/api/train/stop", json={"save": True}).json() == {
        "status": "idle",
        "message": "no training job is running",
    }
    runs = api.get("/api/train/runs").json()
    assert runs[0]["job_id"] == started["job_id"] and runs[0]["phase"] == "completed"
    assert runs[0]["last_step"] == STEPS and runs[0]["final_loss"] > 0
    run = api.get(f"/api/train/runs/{started['job_id']}").json()
    assert [m["step"] for m in run["metrics"]] == list(range(1, STEPS + 1))
    assert run["request"]["max_steps"] == STEPS and "hf_token" not in run["request"]
    assert api.get("/api/train/runs/job_nope").status_code == 404
    reset = api.post("/api/train/reset")
    assert reset.status_code == 200 and api.get("/api/train/status").json()["phase"] == "idle"


def test_sse_ids_rise_heartbeat_when_paused_and_replay_after_reconnect(app_proc, datasets_dir):
    api = _client(app_proc)
    assert (
        api.post("/api/train/start", json=_tiny(app_proc, datasets_dir, max_steps=STEPS)).json()["status"] == "queued"
    )
    stream = sse_events(api, AUTH)
    assert next(stream) == {"retry": "3000"}
    progress = []
    for event in stream:
        assert event["event"] in ("progress", "heartbeat")
        if event["event"] == "progress":
            progress.append(event)
            if int(event["id"]) >= 2:
                break
    ids = [int(e["id"]) for e in progress]
    assert ids == sorted(ids) and ids[0] == 1
    assert json.loads(progress[0]["data"])["loss"] > 0
    worker = app_proc.workers()[0]
    worker.send_signal(signal.SIGSTOP)  # the worker hangs: the stream must say it is alive
    try:
        for event in stream:
            if event["event"] == "heartbeat":
                break
    finally:
        worker.send_signal(signal.SIGCONT)
    seen = int(progress[-1]["id"])
    _wait_step(api, seen + 2)
    replay = sse_events(api, {**AUTH, "Last-Event-ID": str(seen)})
    next(replay)  # retry
    replayed = [int(next(replay)["id"]) for _ in range(2)]
    assert replayed == [seen + 1, seen + 2]
    tail = [e for e in replay if e["event"] != "heartbeat"]
    assert tail[-1]["event"] == "complete" and json.loads(tail[-1]["data"])["step"] == STEPS
    closed = list(sse_events(api, AUTH))  # no job running: the final state, then complete, then close
    assert closed[-1]["event"] == "complete" and closed[-1]["id"] == str(STEPS)


def test_crash_restart_marks_interrupted_and_resume_continues(own_app, datasets_dir):
    app_proc = own_app
    api = _client(app_proc)
    job = api.post("/api/train/start", json=_tiny(app_proc, datasets_dir, max_steps=STEPS, save_steps=2)).json()[
        "job_id"
    ]
    _wait_step(api, 3)
    workers = app_proc.workers()
    for worker in workers:  # frozen mid-run, so the crash below lands before the run could end
        worker.send_signal(signal.SIGSTOP)
    lr_before = {m["step"]: m["learning_rate"] for m in api.get(f"/api/train/runs/{job}").json()["metrics"]}
    app_proc.kill()
    for worker in workers:  # thawed: it finds its app gone and exits (trainer_core.process.parent)
        worker.send_signal(signal.SIGCONT)
    wait_for(lambda: not any(w.is_running() and w.status() != "zombie" for w in workers), 10, "orphan worker exit")
    app_proc.start()
    run = api.get(f"/api/train/runs/{job}").json()
    assert run["phase"] == "interrupted" and len(run["metrics"]) >= 3
    checkpoint = run["last_checkpoint"]
    assert checkpoint and Path(checkpoint).name.startswith("checkpoint-")
    step0 = int(Path(checkpoint).name.split("-")[1])
    bad = api.post("/api/train/start", json=_tiny(app_proc, datasets_dir, resume_from_checkpoint=str(datasets_dir)))
    assert bad.status_code == 400 and "trainer_state.json" in bad.text
    resumed = api.post(
        "/api/train/start",
        json=_tiny(app_proc, datasets_dir, max_steps=STEPS, save_steps=2, resume_from_checkpoint=checkpoint),
    ).json()
    assert resumed["status"] == "queued" and resumed["job_id"] == job
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 300, "resumed run")
    status = api.get("/api/train/status").json()
    assert status["phase"] == "completed" and status["metric_history"]["steps"] == list(range(1, STEPS + 1))
    run = api.get(f"/api/train/runs/{job}").json()
    steps = [m["step"] for m in run["metrics"]]
    assert steps == list(range(1, STEPS + 1)) and run["phase"] == "completed"
    lr_after = {m["step"]: m["learning_rate"] for m in run["metrics"]}
    for step in range(1, step0 + 2):  # the schedule continued where it was, not from the start
        if step in lr_before:
            assert lr_after[step] == pytest.approx(lr_before[step])
    again = api.post("/api/train/start", json=_tiny(app_proc, datasets_dir, resume_from_checkpoint=checkpoint))
    assert again.status_code == 400 and "completed" in again.text


def test_auth_paths_hardware_and_openapi(app_proc, datasets_dir):
    plain = httpx.Client(base_url=app_proc.url, timeout=30)
    assert plain.get("/api/train/status").status_code == 401
    assert plain.get("/api/train/status", headers={"Authorization": "Bearer wrong"}).status_code == 401
    api = _client(app_proc)
    outside = api.post(
        "/api/train/start", json=_body(datasets_dir) | {"local_datasets": [str(datasets_dir / ".." / "STYLE.md")]}
    )
    assert outside.status_code == 400 and "outside the allowed folders" in outside.text
    data_dir = app_proc.folder / "data"
    data_dir.mkdir(exist_ok=True)
    escape = data_dir / "escape.json"
    os.symlink("/etc/hostname", escape)
    via_link = api.post("/api/train/start", json=_body(datasets_dir) | {"local_datasets": [str(escape)]})
    assert via_link.status_code == 400 and "outside the allowed folders" in via_link.text
    missing = api.post(
        "/api/train/start",
        json=_body(datasets_dir) | {"local_datasets": [str(datasets_dir / "a.json"), str(datasets_dir / "b.json")]},
    )
    resolved = [os.path.realpath(datasets_dir / name) for name in ("a.json", "b.json")]
    assert missing.status_code == 400 and missing.json()["detail"]["missing"] == resolved
    assert api.post("/api/train/start", json={"learning_rate": 2}).status_code == 422
    bad_precision = api.post("/api/train/start", json=_body(datasets_dir) | {"mixed_precision": "fp8"})
    assert bad_precision.status_code == 422 and "mixed_precision" in bad_precision.text  # named, not a 500
    assert "Traceback" not in bad_precision.text
    hardware = api.get("/api/train/hardware").json()
    assert hardware["cpu_count"] >= 1 and 0 < hardware["ram_used_gib"] < hardware["ram_total_gib"]
    assert 0 <= hardware["cpu_percent"] <= 100 and isinstance(hardware["gpus"], list)
    assert plain.get("/openapi.json").status_code == 401 and plain.get("/docs").status_code == 401
    spec = api.get("/openapi.json").json()
    for route in ("start", "stop", "reset", "status", "metrics", "progress", "hardware", "runs", "runs/{job_id}"):
        assert f"/api/train/{route}" in spec["paths"]
    assert "TrainingStartRequest" in spec["components"]["schemas"]


def _snapshot(folders: list[Path]) -> dict[str, int]:
    """Every path below ``folders`` with its modification time (ns), but the run history's SQLite
    files (a read updates its shared-memory file)."""
    return {str(p): p.stat().st_mtime_ns for f in folders for p in f.rglob("*") if not p.name.startswith("studio.db")}


def test_every_write_path_field_refuses_another_runs_folder_and_the_studios(app_proc, datasets_dir, tiny_model_dir):
    """As the attacker did it: each field naming a folder the studio writes into, with
    another run's folder (and its checkpoint), the data dir and the allowed root (and, for
    tensorboard_dir, runs/, uploads/, a non-empty models folder and a file) at Start and at the
    check: 400 naming the field, and the audit log of the app and its workers shows nothing
    written, renamed or deleted there (the log does see the app: its connects to the ray_address). A
    Ray storage may be an allowed root (the run makes a folder of its own in it): that one is
    refused for its unreachable ray_address instead."""
    from trainer_core.runs.folders import claim
    from trainer_core.runs.store import RunStore

    if app_proc.process.poll() is not None:  # another test of the module ended it
        app_proc.start()
    api, data = _client(app_proc), app_proc.folder / "data"
    victim = data / "runs" / "job_20000101_000000_0123abcd"
    claim(victim, victim.name)
    (victim / "checkpoint-1").mkdir()
    (victim / "checkpoint-1" / "adapter_model.safetensors").write_bytes(b"the other run's weights")
    store = RunStore(data / "studio.db")
    store.create_run(victim.name, {"max_steps": 1}, str(victim), "completed")
    store.close()
    watched = [data, datasets_dir, tiny_model_dir.parent]
    before = _snapshot(watched)
    log = app_proc.folder / "audit.jsonl"
    start = log.stat().st_size
    common = [victim, victim / "checkpoint-1", data, datasets_dir]
    tensorboard = [data / "runs", data / "uploads", tiny_model_dir, datasets_dir / "alpaca_en_demo.json"]
    ray = {"compute": "ray", "ray_address": "127.0.0.1:1"}
    for field, values, extra in (
        ("output_dir", common, {}),
        ("tensorboard_dir", common + tensorboard, {}),
        ("ray_storage_path", common, ray),
    ):
        for value in values:
            for route in ("/api/train/start", "/api/train/preflight"):
                answer = api.post(
                    route, json=_tiny(app_proc, datasets_dir, max_steps=2, **extra, **{field: str(value)})
                )
                said = str(answer.json().get("detail"))
                assert answer.status_code == 400, (field, value, route, answer.text[:300])
                if field == "ray_storage_path" and value == datasets_dir:  # an allowed root may be the storage
                    assert "ray_storage_path" not in said and ("ray_address" in said or "Ray" in said), said
                else:
                    assert said.startswith(f"{field}: "), (field, value, route, said)
    assert api.get("/api/train/status").json()["phase"] in ("idle", "completed", "stopped", "error")
    events = read_events(log, start)
    assert touched_inside(events, watched) == [], touched_inside(events, watched)[:5]
    assert touched_outside(events, [app_proc.folder]) == []  # nothing anywhere: refused requests write nothing
    assert _snapshot(watched) == before
    assert (victim / "checkpoint-1" / "adapter_model.safetensors").read_bytes() == b"the other run's weights"
    assert {"pid": app_proc.process.pid, "event": "socket.connect", "kind": "connect", "address": ["127.0.0.1", 1]} in events  # fmt: skip


def test_the_secrets_are_nowhere_the_app_wrote(app_proc, datasets_dir):
    """After a run of its own that sent ``hf_token`` (and whatever else ran on this app; the tests
    of this module may run on other workers), with the app stopped so every buffer is written: not
    in the database (and its WAL), logs, run folders or the app's own log."""
    api = _client(app_proc)
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 240, "an idle app")
    started = api.post("/api/train/start", json=_tiny(app_proc, datasets_dir, max_steps=3, hf_token=HF_TOKEN)).json()
    assert started["status"] == "queued", started
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 240, "the run's end")
    app_proc.stop()
    written = [p for p in (app_proc.folder / "data").rglob("*") if p.is_file()]
    assert any(p.name == "metrics.jsonl" for p in written)  # the runs above wrote here
    for path in written:
        if path.suffix not in (".safetensors", ".bin"):
            assert HF_TOKEN.encode() not in path.read_bytes(), path
    log = (app_proc.folder / "app.log").read_text()
    assert HF_TOKEN not in log and TOKEN not in log


def test_ui_login_required_when_set(tmp_path):
    """The page's API (gradio_client) behind the login, on the app built here: the launched app
    reads its login from the environment in test_security's launched-app test."""
    from gradio_client import Client

    from server import build_app
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", username="ada", password="lovelace-1843")
    with ServerThread(build_app(settings)) as server:
        with pytest.raises(Exception):  # noqa: B017 - gradio_client raises a bare error for a refused login
            Client(server.url, verbose=False)
        client = Client(server.url, auth=("ada", "lovelace-1843"), verbose=False)
        assert client.predict(api_name="/watch")[1]["phase"] == "idle"


def test_public_bind_without_credentials_is_refused(tmp_path):
    import subprocess
    import sys

    from tests.support.api_server import REPO

    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    result = subprocess.run(
        [sys.executable, "app.py", "--share"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "without credentials" in result.stderr and "--insecure" in result.stderr
