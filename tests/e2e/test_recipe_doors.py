"""The recipe doors of the whole app (login and token on) tried with raw HTTP as an attacker would:
documents, seed rows and resume folders outside the allowed folders, a remote endpoint, the server's
environment named as the key; and one real run, preview and push whose key (the studio's token, the
writer being the app's own /v1 serving the tiny model) and Hub token are then searched for in every
answer, the task store, the data folder's files and the logs. The Hub is not reachable here: a push
ends failed saying so, as a model push does (tests/e2e/test_task_security.py)."""

from __future__ import annotations

import json
import logging
import shutil

import httpx
import pytest
import yaml

from tests.e2e.conftest import CANARY, TOKEN, ServerThread, api, locked_settings, wait_for
from tests.support import fake_workers
from tests.support.recipe_server import RUN, topics_recipe

pytestmark = pytest.mark.slow
HF_TOKEN = "hf_DatasetPushTokenNeverEcho42"


@pytest.fixture(scope="module")
def app(tmp_path_factory, tiny_model_dir):
    """(settings, url, /v1 URL): the whole app, its own /v1 serving the tiny model as run RUN."""
    from server import build_app
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore

    mine = tmp_path_factory.mktemp("mine")
    settings = locked_settings(tmp_path_factory.mktemp("data"), f"{mine},{tiny_model_dir.parent}")
    store = RunStore(settings.db_path)
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    shutil.copytree(tiny_model_dir, settings.runs_dir / RUN)
    store.create_run(RUN, {"model_name": str(tiny_model_dir)}, str(settings.runs_dir / RUN), "completed")
    with ServerThread(build_app(settings, runner)) as server:
        url = server.url.rstrip("/")
        yield settings, url, f"{url}/v1"


def _recipe(v1: str, **changes) -> str:
    data = topics_recipe(v1, RUN, ["cats", "ox", "dogs"])
    data["model"].pop("api_key_env")  # the key comes in the request's api_key field
    data.update(changes)
    return yaml.safe_dump(data)


def test_recipe_doors_need_the_token(app):
    _, url, _ = app
    anonymous = httpx.Client(base_url=url, timeout=30)
    for method, path, body in (
        ("POST", "/api/recipes/run", {"yaml": "x"}),
        ("POST", "/api/recipes/preview", {"yaml": "x"}),
        ("GET", "/api/recipes/results", None),
        ("POST", "/api/recipes/push", {"result": "x", "repo_id": "a/b"}),
    ):
        assert anonymous.request(method, path, json=body).status_code == 401, path


def test_paths_endpoints_and_folders_outside_are_refused(app, tmp_path):
    settings, url, v1 = app
    client = api(url)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.md").write_text(f"# {CANARY}\n")
    (outside / "rows.jsonl").write_text(json.dumps({"topic": CANARY}) + "\n")
    (settings.data_dir / "recipes").mkdir(exist_ok=True)
    (settings.data_dir / "recipes" / "escape").symlink_to(outside, target_is_directory=True)
    (outside / "recipe.yaml").write_text(_recipe(v1))
    cases = [
        ({"yaml": _recipe(v1, topics=[], documents=[str(outside / "notes.md")])}, "documents"),
        ({"yaml": _recipe(v1, topics=[], documents=["../../../" + str(outside)])}, "documents"),
        ({"yaml": _recipe(v1, topics=[], seed_rows=str(outside / "rows.jsonl"))}, "seed_rows"),
        (
            {"yaml": _recipe(v1, model={**yaml.safe_load(_recipe(v1))["model"], "endpoint": "http://10.1.2.3/v1"})},
            "endpoint",
        ),
        (
            {
                "yaml": _recipe(v1, model={**yaml.safe_load(_recipe(v1))["model"], "api_key_env": "HF_TOKEN"}),
                "api_key": None,
            },
            "api_key_env",  # no key sent: the server reads no environment variable for one
        ),
        ({"yaml": "", "resume": "../../" + outside.name}, "resume"),
        ({"yaml": "", "resume": str(outside)}, "resume"),
        ({"yaml": "", "resume": "escape"}, "resume"),  # a link in the recipes folder that leads out
    ]
    for body, field in cases:
        for door in ("/api/recipes/run", "/api/recipes/preview"):
            if door.endswith("preview") and "resume" in body:
                continue
            answer = client.post(door, json={"api_key": TOKEN, **body})
            assert answer.status_code == 400, (door, field, answer.text)
            assert field in answer.json()["detail"] and answer.json()["code"], answer.text
            assert CANARY not in answer.text and TOKEN not in answer.text and "Traceback" not in answer.text
    assert client.get("/api/train/tasks", params={"kind": "recipe"}).json() == []  # no task was started
    assert "escape" not in [r["name"] for r in client.get("/api/recipes/results").json()]
    bad = client.post("/api/recipes/run", json={"yaml": "x", "api_key": TOKEN, "key": "misnamed"})
    assert bad.status_code == 422 and TOKEN not in bad.text


def test_a_run_preview_and_push_keep_the_key_and_token_to_themselves(app, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    settings, url, v1 = app
    client = api(url)
    answers = []
    preview = client.post("/api/recipes/preview", json={"yaml": _recipe(v1), "api_key": TOKEN})
    answers.append(preview.text)
    assert preview.status_code == 200, preview.text
    assert [r["record"] for r in preview.json()["records"]] == [0, 1, 2]
    assert preview.json()["preview"]["dropped"]["length"] == 1
    assert not (settings.data_dir / "recipes").exists() or not any((settings.data_dir / "recipes").glob("topics-*"))

    started = client.post("/api/recipes/run", json={"yaml": _recipe(v1), "api_key": TOKEN})
    answers.append(started.text)
    assert started.status_code == 200 and started.json()["kind"] == "recipe", started.text
    task_id = started.json()["task_id"]
    wait_for(lambda: client.get(f"/api/train/tasks/{task_id}").json()["phase"] != "running", 300, "recipe run")
    done = client.get(f"/api/train/tasks/{task_id}").json()
    assert done["phase"] == "completed" and done["result"]["counts"]["made"] == 3, done
    data = client.get(f"/api/train/tasks/{task_id}/files/data.jsonl")  # downloadable as an export's files
    assert data.status_code == 200 and len(data.text.splitlines()) == done["result"]["counts"]["kept"]
    assert client.get(f"/api/train/tasks/{task_id}/files/made.jsonl").status_code == 404
    listed = client.get("/api/recipes/results").json()
    assert listed[0]["name"] == done["result"]["name"] and listed[0]["counts"] == done["result"]["counts"]
    answers += [json.dumps(done), json.dumps(listed), client.get("/api/train/tasks").text]

    pushed = client.post("/api/recipes/push", json={"result": task_id, "repo_id": "someone/topics", "token": HF_TOKEN})
    answers.append(pushed.text)
    assert pushed.status_code == 200 and pushed.json()["request"]["repo_type"] == "dataset", pushed.text
    push_id = pushed.json()["task_id"]
    wait_for(lambda: client.get(f"/api/train/tasks/{push_id}").json()["phase"] != "running", 120, "push")
    failed = client.get(f"/api/train/tasks/{push_id}").json()
    assert failed["phase"] == "failed" and "could not reach" in failed["error"], failed  # no Hub here
    answers.append(json.dumps(failed))

    out, err = capfd.readouterr()
    for text in [*answers, caplog.text, out, err]:
        assert TOKEN not in text and HF_TOKEN not in text
    for path in settings.data_dir.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes() and HF_TOKEN.encode() not in path.read_bytes(), path
