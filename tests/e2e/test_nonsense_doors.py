"""Issue 46, item 6: nonsense the API used to accept, tried over raw HTTP on the whole app (login and
token, a fake stepping worker): each is refused naming the field (422 as the neighbouring refusals
of the route), or, for a blank ``resume_from_checkpoint``, taken as "not set" so the run starts fresh."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import alpaca, api, idle


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
