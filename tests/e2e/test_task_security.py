"""The task doors (export, evaluate) tried as an attacker would (raw HTTP, login and token on): the
task routes need the token, downloads need the token or a page login and serve only files a finished task listed in
its own folder, and a Hub token sent for a push is never stored or echoed. Fake task workers keep
each test to seconds; the real export and evaluation are tested in test_export_*/test_evaluation_*."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import CANARY, PASSWORD, TOKEN, USER, ServerThread, api, logged_in, wait_for
from tests.support import fake_task_workers, fake_workers
from trainer_core.runs.folders import claim
from trainer_core.serving.schemas import ModelChoice
from trainer_core.tasks.schemas import TaskKind

HF_TOKEN = "hf_PushTokenThatMustNeverEcho99"


@pytest.fixture(scope="module")
def app_with_tasks(tmp_path_factory, datasets_dir):
    """(settings, tasks, url, choice) of the whole app (login + token) with one finished run."""
    from server import build_app
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("data"),
        allowed_paths=str(datasets_dir),
        username=USER,
        password=PASSWORD,
        api_token=TOKEN,
        login_attempts_per_minute=10_000,
    )
    store = RunStore(settings.db_path)
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    folder = settings.runs_dir / "job-1"
    folder.mkdir(parents=True)
    claim(folder, "job-1")
    store.create_run("job-1", {"model_name": "m"}, str(folder), "completed")
    choice = ModelChoice(
        id="job-1", label="job-1", kind="final", base_model="m", path=str(folder), job_id="job-1", adapter=True
    )
    app = build_app(settings, runner)
    with ServerThread(app) as server:
        yield settings, app.state.tasks, server.url.rstrip("/"), choice


def _finished(tasks, target=fake_task_workers.writing_task, request=None):
    record = tasks.start(TaskKind.export, choice_of(tasks), request or {"bytes": 7}, target)
    assert tasks.wait(30)
    return tasks.get(record.task_id)


def choice_of(tasks) -> ModelChoice:
    folder = tasks.settings.runs_dir / "job-1"
    return ModelChoice(
        id="job-1", label="job-1", kind="final", base_model="m", path=str(folder), job_id="job-1", adapter=True
    )


def test_task_routes_need_the_token(app_with_tasks):
    _, _, url, _ = app_with_tasks
    anonymous = httpx.Client(base_url=url, timeout=30)
    for method, path, body in (
        ("POST", "/api/train/export", {"model": "job-1"}),
        ("POST", "/api/train/evaluate", {}),
        ("POST", "/api/train/push", {"task_id": "x", "repo_id": "a/b"}),
        ("GET", "/api/train/tasks", None),
        ("GET", "/api/train/tasks/x", None),
        ("DELETE", "/api/train/tasks/x", None),
    ):
        answer = anonymous.request(method, path, json=body)
        assert answer.status_code == 401, (path, answer.status_code)
        # a page login alone does not open the API either (the token guards it)
        assert logged_in(url).request(method, path, json=body).status_code == 401


def test_downloads_serve_only_listed_files_of_a_finished_task(app_with_tasks, tmp_path):
    settings, tasks, url, _ = app_with_tasks
    done = _finished(tasks)
    base = f"/api/train/tasks/{done.task_id}/files"
    assert httpx.get(url + base + "/out.bin").status_code == 401  # no login, no token
    assert api(url).get(base + "/out.bin").content == b"x" * 7
    assert logged_in(url).get(base + "/out.bin").content == b"x" * 7  # the Runs tab's links
    (settings.data_dir / "secret.txt").write_text(CANARY)
    outside = tmp_path / "canary.txt"
    outside.write_text(CANARY)
    client = api(url)
    for name in (
        "../../../../studio.db",
        "..%2F..%2F..%2F..%2Fstudio.db",
        "%2Fetc%2Fpasswd",
        "/etc/passwd",
        "../../../../secret.txt",
        "unlisted.bin",
        str(outside),
        "out.bin/..",
        ".",
    ):
        answer = client.get(f"{base}/{name}")
        assert answer.status_code == 404 and CANARY not in answer.text, (name, answer.status_code)
    assert client.get("/api/train/tasks/../../studio.db/files/x").status_code == 404
    assert client.get("/api/train/tasks/no-such-task/files/out.bin").status_code == 404
    # every listed file in one zip (the Runs tab's "All files (zip)" link), for the same logins
    zipped = f"/api/train/tasks/{done.task_id}/zip"
    assert httpx.get(url + zipped).status_code == 401
    for who in (client, logged_in(url)):
        answer = who.get(zipped)
        assert answer.headers["content-type"] == "application/zip"
        with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
            assert archive.testzip() is None and archive.read("out.bin") == b"x" * 7
    for bad in ("no-such-task", "..%2F..%2Fstudio.db", "%2Fetc"):
        assert client.get(f"/api/train/tasks/{bad}/zip").status_code == 404
    # a listed file swapped for a link to a file outside: not served, alone or zipped
    listed = Path(done.output_dir) / "out.bin"
    listed.unlink()
    listed.symlink_to(outside)
    answer = client.get(base + "/out.bin")
    assert answer.status_code == 404 and CANARY not in answer.text
    answer = client.get(zipped)
    assert answer.status_code == 404 and CANARY not in answer.text


def test_a_running_or_failed_task_serves_nothing(app_with_tasks):
    _, tasks, url, _ = app_with_tasks
    record = tasks.start(TaskKind.export, choice_of(tasks), {}, fake_task_workers.slow_task)
    client = api(url)
    assert client.get(f"/api/train/tasks/{record.task_id}/files/partial.bin").status_code == 404
    assert client.get(f"/api/train/tasks/{record.task_id}/zip").status_code == 404
    assert client.get(f"/api/train/tasks/{record.task_id}").json()["phase"] == "running"
    assert client.delete(f"/api/train/tasks/{record.task_id}").json()["status"] == "cancelling"
    wait_for(lambda: client.get(f"/api/train/tasks/{record.task_id}").json()["phase"] == "cancelled", 20, "cancel")
    assert client.delete(f"/api/train/tasks/{record.task_id}").json()["status"] == "idle"
    failed = _finished(tasks, fake_task_workers.failing_task)
    assert client.get(f"/api/train/tasks/{failed.task_id}/files/half.bin").status_code == 404


def test_a_push_token_is_never_stored_or_echoed(app_with_tasks):
    settings, tasks, url, _ = app_with_tasks
    client = api(url)
    bad = client.post("/api/train/push", json={"task_id": "x", "repo_id": "a", "token": HF_TOKEN, "private": "maybe"})
    assert bad.status_code == 422 and HF_TOKEN not in bad.text
    done = _finished(tasks)
    answer = client.post(
        "/api/train/push", json={"task_id": done.task_id, "repo_id": "someone/model", "token": HF_TOKEN}
    )
    assert HF_TOKEN not in answer.text
    if answer.status_code == 200:
        wait_for(
            lambda: client.get(f"/api/train/tasks/{answer.json()['task_id']}").json()["phase"] != "running", 120, "push"
        )
        finished = client.get(f"/api/train/tasks/{answer.json()['task_id']}").json()
        assert finished["phase"] == "failed" and HF_TOKEN not in json.dumps(finished)
    listing = client.get("/api/train/tasks").text
    assert HF_TOKEN not in listing
    for path in settings.data_dir.rglob("*"):
        if path.is_file():
            assert HF_TOKEN.encode() not in path.read_bytes(), path


def test_unknown_models_and_busy_answers(app_with_tasks):
    _, tasks, url, _ = app_with_tasks
    client = api(url)
    for model in ("no-such-run", "../../etc", "job-1/../../x", "job-1/checkpoint-99", "base"):
        answer = client.post("/api/train/export", json={"model": model, "format": "adapter"})
        assert answer.status_code in (400, 404), (model, answer.status_code, answer.text)
        assert "Traceback" not in answer.text
    assert client.post("/api/train/export", json={"model": "job-1", "format": "gguf-q3_k_s"}).status_code == 422
    tasks.start(TaskKind.export, choice_of(tasks), {}, fake_task_workers.slow_task)
    try:
        busy = client.post("/api/train/evaluate", json={"model": "job-1"})
        assert busy.status_code in (400, 409)
        started = client.post("/api/train/start", json={"local_datasets": ["x.json"]})
        assert started.status_code in (200, 400)
        if started.status_code == 200:
            assert started.json()["status"] == "error"
    finally:
        tasks.cancel()
        tasks.wait(10)


def test_raw_queue_calls_to_the_panels_read_nothing_outside(app_with_tasks, outside):
    """The Evaluate and Export events called by hand: an upload value naming a server file, typed
    paths outside the allowed folders, model ids that climb out: refused in the panel's status, the
    canary never read or copied, no task started."""
    from tests.support.raw_gradio import RawGradio, file_value

    settings, tasks, url, _ = app_with_tasks
    raw = RawGradio(logged_in(url))
    evaluate, export = raw.fn_index("evaluate"), raw.fn_index("export")
    before = len(tasks.list())
    attempts = [
        ["job-1", file_value(str(outside / "canary.jsonl")), "", None, 8, 4, True],
        ["job-1", None, str(outside / "canary.jsonl"), None, 8, 4, True],
        ["job-1", None, str(settings.data_dir / ".." / "outside" / "canary.jsonl"), None, 8, 4, True],
        ["../../etc", None, "", None, 8, 4, True],
    ]
    for data in attempts:
        answer = raw.call(evaluate, data)
        text = json.dumps(answer)
        assert CANARY not in text, text[:400]
        assert "Not started" in text or "not uploaded" in text, text[:400]  # ours, or Gradio's own upload check
    for model in ("../../etc", "job-1/../../../x", "job-1/checkpoint-1/../../.."):
        answer = raw.call(export, ["job-1", model, "adapter", "float16", []])
        text = json.dumps(answer)
        assert CANARY not in text and "Not started" in text, text[:400]
    assert len(tasks.list()) == before
    assert not any(p.name.startswith("canary") for p in settings.data_dir.rglob("*"))


def test_an_evaluation_file_can_be_uploaded_on_the_train_form(app_with_tasks, outside, datasets_dir):
    """The Train form's evaluation upload: a real upload is kept and trained with as the eval set;
    a file value naming a server file is refused before it is read."""
    from tests.e2e.conftest import form_args
    from tests.support.raw_gradio import RawGradio, error_text, file_value

    settings, tasks, url, _ = app_with_tasks
    client = logged_in(url)
    raw = RawGradio(client)
    start = raw.fn_index("start")
    train = str(datasets_dir / "identity.json")
    args = form_args(train, max_steps=3)
    refused = raw.call(start, [args[0], args[1], file_value(str(outside / "canary.jsonl")), *args[3:]], pad=True)
    assert "not uploaded" in error_text(refused) and CANARY not in json.dumps(refused)
    with open(datasets_dir / "alpaca_en_demo.json", "rb") as fh:
        uploaded = client.post("/gradio_api/upload", files={"files": ("held_out.json", fh)}).json()[0]
    started = raw.call(start, [args[0], args[1], file_value(uploaded), *args[3:]], timeout_s=120, pad=True)
    assert started["success"], started
    runs = tasks.run_store.list_runs()
    newest = max(runs, key=lambda r: r.created_at)
    (kept,) = newest.request["local_eval_datasets"]
    assert Path(kept).parent == settings.uploads_dir.resolve() and Path(kept).name.startswith("held_out-")
