"""The queue's doors on the whole app with login and token (fake stepping worker): the
``/api/train/queue`` routes and the page's ``queue_add`` / ``queue_up`` / ``queue_down`` /
``queue_remove`` events, tried with the happy client and as an attacker would (no token, paths
outside the allowed folders, odd ids, extra fields, a token that must not be stored)."""

from __future__ import annotations

import json

import httpx

from tests.e2e.conftest import CANARY, alpaca, api, assert_no_canary, form_args, idle, logged_in, snapshot, wait_for
from tests.support.raw_gradio import RawGradio, error_text

HF_TOKEN = "hf_QueueDoorSecretNeverEchoed7"


def _quiet(runner, client: httpx.Client) -> None:
    """No job running and nothing queued (earlier tests share the app)."""
    for entry in client.get("/api/train/queue").json():
        client.delete(f"/api/train/queue/{entry['queue_id']}")
    idle(runner)


def test_queue_routes_need_the_token(studio, datasets_dir):
    _, _, url = studio
    bare = httpx.Client(base_url=url, timeout=30)
    body = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 2}
    for method, path, payload in (
        ("GET", "/api/train/queue", None),
        ("POST", "/api/train/queue", body),
        ("DELETE", "/api/train/queue/q_1_deadbeef", None),
        ("POST", "/api/train/queue/q_1_deadbeef/move", {"position": 1}),
    ):
        assert bare.request(method, path, json=payload).status_code == 401, (method, path)
    assert api(url).get("/api/train/queue").status_code == 200


def test_queue_runs_jobs_in_order_after_the_running_one_and_reorders(studio, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    _quiet(runner, client)
    # runs until stopped below (under a loaded machine a 10 s job ended before the third was queued)
    held = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 6000}
    first = client.post("/api/train/start", json=held).json()
    assert first["status"] == "queued"
    added = []
    for lr in (1e-4, 2e-4, 3e-4):
        answer = client.post(
            "/api/train/queue", json={"local_datasets": [alpaca(datasets_dir)], "learning_rate": lr, "max_steps": 2}
        )
        assert answer.status_code == 200, answer.text
        added.append(answer.json())
    assert [e["position"] for e in added] == [1, 2, 3] and added[0]["state"] == "waiting"
    assert "alpaca_en_demo.json" in added[0]["summary"] and "lr 0.0001" in added[0]["summary"]
    assert client.post("/api/train/start", json={"local_datasets": [alpaca(datasets_dir)]}).json()["status"] == "error"
    moved = client.post(f"/api/train/queue/{added[2]['queue_id']}/move", json={"position": 1})
    assert moved.status_code == 200 and moved.json()["position"] == 1
    assert client.delete(f"/api/train/queue/{added[1]['queue_id']}").json() == {"removed": added[1]["queue_id"]}
    assert [e["queue_id"] for e in client.get("/api/train/queue").json()] == [
        added[2]["queue_id"],
        added[0]["queue_id"],
    ]
    assert client.post("/api/train/stop").status_code == 200  # the queue moves on once it has stopped
    wait_for(
        lambda: client.get("/api/train/queue").json() == [] and not runner.status().is_training_running,
        90,
        "the queue to drain",
    )
    runs = client.get("/api/train/runs").json()[:3]
    assert [r["request"]["learning_rate"] for r in reversed(runs)] == [1e-3, 3e-4, 1e-4]  # the default, then the queue
    assert [r["phase"] for r in reversed(runs)] == ["stopped", "completed", "completed"]


def test_queue_add_refuses_paths_outside_and_stores_no_token(studio, outside, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    _quiet(runner, client)
    hold = client.post("/api/train/start", json={"local_datasets": [alpaca(datasets_dir)]}).json()  # keeps them waiting
    assert hold["status"] == "queued"
    before = snapshot(outside)
    for path in (str(outside / "canary.jsonl"), f"{datasets_dir}/../{outside.name}/canary.json", "/etc/passwd"):
        refused = client.post("/api/train/queue", json={"local_datasets": [path]})
        assert refused.status_code == 400 and CANARY not in refused.text, refused.text
    refused = client.post("/api/train/queue", json={"local_datasets": [alpaca(datasets_dir)], "output_dir": "/etc/x"})
    assert refused.status_code == 400 and "output_dir" in refused.text
    assert client.get("/api/train/queue").json() == []
    answer = client.post("/api/train/queue", json={"local_datasets": [alpaca(datasets_dir)], "hf_token": HF_TOKEN})
    assert answer.status_code == 200 and HF_TOKEN not in answer.text and answer.json()["had_token"] is True
    assert HF_TOKEN not in client.get("/api/train/queue").text
    for path in settings.data_dir.rglob("*.db*"):
        assert HF_TOKEN.encode() not in path.read_bytes()
    assert snapshot(outside) == before
    assert_no_canary(settings.data_dir)
    _quiet(runner, client)


def test_queue_ids_and_bodies_are_checked(studio):
    _, runner, url = studio
    client = api(url)
    for path in ("/api/train/queue/..%2F..%2Fetc", "/api/train/queue/q_1_DEADBEEF", "/api/train/queue/x" * 3):
        assert client.delete(path).status_code in (404, 422), path
    assert client.delete("/api/train/queue/q_1_deadbeef").status_code == 404
    for body in ({"position": 0}, {"position": "first"}, {"position": 1, "extra": True}, {}):
        answer = client.post("/api/train/queue/q_1_deadbeef/move", json=body)
        assert answer.status_code == 422, (body, answer.text)
    assert client.post("/api/train/queue/q_1_deadbeef/move", json={"position": 1}).status_code == 404
    assert client.post("/api/train/queue", json={"local_datasets": ["a.json"], "unknown_field": 1}).status_code == 422
    assert (
        client.post("/api/train/queue", content=b"{not json", headers={"content-type": "application/json"}).status_code
        == 422
    )


def test_queue_events_refuse_foreign_paths_and_odd_ids(studio, outside, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    _quiet(runner, client)
    hold = client.post("/api/train/start", json={"local_datasets": [alpaca(datasets_dir)]}).json()
    assert hold["status"] == "queued"
    raw = RawGradio(logged_in(url))
    add = raw.fn_index("queue_add")
    refused = raw.call(add, form_args(str(outside / "canary.jsonl")), pad=True)
    assert refused["success"] and CANARY not in json.dumps(refused)
    assert "Not queued" in refused["output"]["data"][2]
    good = raw.call(add, form_args(alpaca(datasets_dir), hf_token=HF_TOKEN, max_steps=2), pad=True)
    assert good["success"], error_text(good)
    table, line, notice = good["output"]["data"]
    assert notice == "" and "1 job waiting" in line and HF_TOKEN not in json.dumps(good)
    queue_id = table["data"][0][table["headers"].index("queue id")]
    for name in ("queue_up", "queue_down", "queue_remove"):
        for junk in ("", "'; DROP TABLE queue; --", "<img src=x onerror=alert(1)>", "q_1_deadbeef"):
            answer = raw.call(raw.fn_index(name), [junk])
            assert answer["success"], error_text(answer)
            assert "<img" not in json.dumps(answer["output"]["data"][2])  # said as text
    assert [e["queue_id"] for e in client.get("/api/train/queue").json()] == [queue_id]
    removed = raw.call(raw.fn_index("queue_remove"), [queue_id])
    assert "Removed" in removed["output"]["data"][2] and client.get("/api/train/queue").json() == []
    _quiet(runner, client)
