"""Nonsense the API used to accept, tried over raw HTTP on the whole app (login and
token, a fake stepping worker): each is refused naming the field (422 as the neighbouring refusals
of the route), or, for a blank ``resume_from_checkpoint``, taken as "not set" so the run starts fresh.
And every door's refusal is one JSON shape, ``{"detail", "fields", "code"}`` with its 4xx
(``api.errors``); the OpenAI-compatible routes keep OpenAI's."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import alpaca, api, idle

REFUSAL_KEYS = {"detail", "fields", "code"}


@pytest.mark.parametrize(
    "fields, loc, words",
    [
        ({"max_steps": True}, ["body", "max_steps"], "a whole number is needed here, not true or false"),
        ({"lora_r": False}, ["body", "lora_r"], "not true or false"),
        ({"batch_size": True}, ["body", "batch_size"], "not true or false"),
        (
            {"training_method": "grpo", "rewards": [{"name": "language", "script": "klingon"}]},
            ["body", "rewards", "0", "script"],
            "'latin', 'cyrillic'",
        ),
        ({"train_split": "test"}, ["body"], "train_split ('test') picks a part of a Hub dataset (hf_dataset)"),
        ({"eval_split": "validation"}, ["body"], "eval_split ('validation') picks a part of a Hub dataset"),
    ],
)
def test_start_and_queue_refuse_nonsense_naming_the_field(studio, datasets_dir, fields, loc, words):
    settings, runner, url = studio
    client = api(url)
    for path in ("/api/train/start", "/api/train/queue"):
        answer = client.post(path, json={"local_datasets": [alpaca(datasets_dir)], "max_steps": 2, **fields})
        assert answer.status_code == 422, (path, answer.text)
        [error] = answer.json()["detail"]
        assert error["loc"] == loc and words in error["msg"], error
    assert runner.status().job_id is None and client.get("/api/train/queue").json() == []


def test_a_blank_resume_from_checkpoint_starts_a_fresh_run(studio, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    answer = client.post(
        "/api/train/start",
        json={"local_datasets": [alpaca(datasets_dir)], "max_steps": 2, "resume_from_checkpoint": ""},
    )
    assert answer.status_code == 200 and answer.json()["status"] == "queued", answer.text
    job_id = answer.json()["job_id"]
    try:
        run = client.get(f"/api/train/runs/{job_id}").json()
        assert run["request"]["resume_from_checkpoint"] is None  # what the worker reads: nothing to resume
        assert run["output_dir"] == str(settings.runs_dir / job_id)  # a new run in its own folder
    finally:
        idle(runner)


def test_a_queue_move_refuses_a_boolean_position(studio):
    _, _, url = studio
    answer = api(url).post("/api/train/queue/q_1_deadbeef/move", json={"position": True})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "position"]


def test_the_leaderboard_names_an_unknown_model_and_keeps_a_known_one(studio):
    _, _, url = studio
    client = api(url)
    unknown = client.get("/api/arena/leaderboard", params={"models": ["base", "klingon-7b"]})
    assert unknown.status_code == 404 and "'klingon-7b'" in unknown.json()["detail"], unknown.text
    known = client.get("/api/arena/leaderboard", params={"models": ["base"]})
    assert known.status_code == 200 and [(s["model"], s["battles"]) for s in known.json()["standings"]] == [("base", 0)]


def _refused(answer, status: int, code: str, fields: list[str]) -> dict:
    body = answer.json()
    assert answer.status_code == status and set(body) == REFUSAL_KEYS, (answer.status_code, answer.text[:400])
    assert (body["code"], body["fields"]) == (code, fields), answer.text[:400]
    return body


def test_start_check_and_queue_refusals_carry_their_fields_and_code(studio, outside, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    base = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 2}
    for route in ("/api/train/start", "/api/train/preflight", "/api/train/queue"):
        foreign = client.post(route, json={**base, "local_datasets": [str(outside / "canary.json")]})
        said = _refused(foreign, 400, "path_not_allowed", ["local_datasets"])
        assert said["detail"].startswith("local_datasets: ") and "outside the allowed folders" in said["detail"]
    missing = client.post("/api/train/start", json={**base, "local_datasets": [str(datasets_dir / "nope.json")]})
    said = _refused(missing, 400, "missing_files", ["local_datasets"])
    assert said["detail"] == {"message": "dataset files not found", "missing": [str(datasets_dir / "nope.json")]}
    taken = client.post("/api/train/preflight", json={**base, "output_dir": str(settings.data_dir)})
    assert _refused(taken, 400, "output_dir_taken", ["output_dir"])["detail"].startswith("output_dir: ")
    invalid = client.post("/api/train/start", json={**base, "learning_rate": 5, "hf_token": "hf_NeverEchoed42"})
    body = invalid.json()
    assert invalid.status_code == 422 and (body["code"], body["fields"]) == ("invalid_setting", ["learning_rate"])
    assert body["detail"][0]["loc"] == ["body", "learning_rate"] and "hf_NeverEchoed42" not in invalid.text
    rule = client.post("/api/train/queue", json={**base, "warmup_steps": 5, "warmup_ratio": 0.1})
    assert rule.status_code == 422 and rule.json()["fields"] == ["warmup_steps", "warmup_ratio"]
    assert not runner.status().is_training_running and client.get("/api/train/queue").json() == []


def test_runs_tasks_arena_share_and_queue_refusals_carry_their_fields_and_code(studio):
    _, _, url = studio
    client = api(url)
    job = "job_20000101_000000_0123abcd"
    _refused(client.get(f"/api/train/runs/{job}"), 404, "unknown_run", ["job_id"])
    _refused(client.patch(f"/api/train/runs/{job}", json={"name": "a\u202eb"}), 422, "invalid_label", ["name"])
    _refused(client.get("/api/train/runs/compare", params={"job_ids": ","}), 422, "invalid_setting", ["job_ids"])
    _refused(client.delete("/api/train/queue/q_1_0123abcd"), 404, "unknown_queue_entry", ["queue_id"])
    export = client.post("/api/train/export", json={"model": job, "format": "adapter"})
    _refused(export, 404, "unknown_model", ["model"])
    _refused(client.get("/api/train/tasks/nope"), 404, "unknown_task", ["task_id"])
    _refused(client.get("/api/arena/battles/nope"), 404, "unknown_battle", [])
    twice = client.post("/api/arena/battles", json={"prompt": "hi", "models": [job, job]})
    _refused(twice, 400, "arena_refused", ["models"])
    _refused(client.delete("/api/train/share/nope"), 404, "unknown_share_link", [])
    _refused(client.post("/api/train/share", json={"model": "base"}), 400, "model_not_shareable", ["model"])
    openai = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert openai.status_code == 400 and set(openai.json()) == {"error"}  # OpenAI's shape, as it was
