"""The arena through its doors, over a copy of the tiny trained run's history: the API as a client
and as an attacker would use it (no token, a bad vote, a second vote, unknown battles, a battle
while a job trains), and the page in a real browser (pick two checkpoints, battle, vote: the names
show after the vote and the leaderboard counts it)."""

from __future__ import annotations

import shutil

import httpx
import pytest

from tests.e2e.conftest import ServerThread, allowed, wait_for
from tests.support.page_tools import ARGS, CHROMIUM, start_job, table_rows

pytestmark = pytest.mark.slow
TOKEN = "test-arena-token-9c4e2b"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SHORT = {"max_new_tokens": 6}


@pytest.fixture(scope="module")
def arena_app(tmp_path_factory, tiny_trained_run, tiny_model_dir, datasets_dir):
    from server import build_app
    from trainer_core.settings import Settings

    data = tmp_path_factory.mktemp("arena") / "data"
    shutil.copytree(tiny_trained_run.settings.data_dir, data)  # the shared run stays untouched
    settings = Settings(
        data_dir=data,
        allowed_paths=allowed(datasets_dir, tiny_model_dir.parent, tiny_trained_run.settings.data_dir),
        api_token=TOKEN,
    )
    app = build_app(settings)
    with ServerThread(app) as server:
        yield app.state.runner, server.url, tiny_trained_run.job_id
        app.state.runner.stop(save=False)
        app.state.runner.wait(30)


def test_the_api_hides_names_until_one_vote_and_refuses_while_training(arena_app, datasets_dir, tiny_model_dir):
    runner, url, job = arena_app
    api = httpx.Client(base_url=url, headers=AUTH, timeout=120)
    pair = [f"{job}/checkpoint-1", job]
    body = {"prompt": "Who are you?", "models": pair, "settings": SHORT}
    assert httpx.post(url + "api/arena/battles", json=body).status_code == 401  # no token
    assert (
        httpx.get(url + "api/arena/leaderboard", headers={"Authorization": "Bearer wrong-token-123456"}).status_code
        == 401
    )
    battle = api.post("/api/arena/battles", json=body)
    assert battle.status_code == 200, battle.text
    found = battle.json()
    assert found["left"]["model"] is None and found["right"]["model"] is None and found["vote"] is None
    assert found["left"]["text"] and found["right"]["text"] and job not in battle.text
    assert api.get(f"/api/arena/battles/{found['battle_id']}").json()["left"]["model"] is None
    assert api.post(f"/api/arena/battles/{found['battle_id']}/vote", json={"vote": "middle"}).status_code == 422
    voted = api.post(f"/api/arena/battles/{found['battle_id']}/vote", json={"vote": "left"})
    assert voted.status_code == 200 and {voted.json()["left"]["model"], voted.json()["right"]["model"]} == set(pair)
    again = api.post(f"/api/arena/battles/{found['battle_id']}/vote", json={"vote": "right"})
    assert again.status_code == 409 and "vote already (left)" in again.text
    assert api.post("/api/arena/battles/battle_nope/vote", json={"vote": "left"}).status_code == 404
    assert api.get("/api/arena/battles/..%2F..%2Fetc%2Fpasswd").status_code == 404
    winner = voted.json()["left"]["model"]
    board = api.get("/api/arena/leaderboard", params={"models": pair}).json()
    assert board["battles"] == 1 and board["standings"][0]["model"] == winner and board["standings"][0]["elo"] == 1016.0
    same = api.post("/api/arena/battles", json={**body, "models": [job, job]})
    assert same.status_code == 400 and "two different models" in same.text
    unknown = api.post("/api/arena/battles", json={**body, "models": [job, "job_nope"]})
    assert unknown.status_code == 404
    assert api.post("/api/arena/battles", json={**body, "models": [job, job, job]}).status_code == 422
    assert api.post("/api/arena/battles", json={**body, "models": ["../../etc/passwd"]}).status_code == 404
    long_id = api.post("/api/arena/battles", json={**body, "models": [job, "x" * 100_000]})
    assert long_id.status_code == 422 and len(long_id.content) < 5_000  # refused by length, not echoed back
    assert api.get("/api/arena/leaderboard", params={"models": ""}).status_code == 422  # an empty name is no model
    one = api.post("/api/arena/battles", json={**body, "models": [job]})  # one named: the other at random
    assert one.status_code == 200 and job not in one.text, one.text
    shown = api.post(f"/api/arena/battles/{one.json()['battle_id']}/vote", json={"vote": "tie"}).json()
    assert (
        job in (shown["left"]["model"], shown["right"]["model"]) and shown["left"]["model"] != shown["right"]["model"]
    )
    start_job(runner, datasets_dir, model_name=str(tiny_model_dir), max_steps=400, save_steps=1000)
    wait_for(lambda: runner.status().is_training_running, 60, "training starts")
    busy = api.post("/api/arena/battles", json=body)
    assert busy.status_code == 409 and "training job" in busy.text
    runner.stop(save=False)
    assert runner.wait(60)
    assert len(api.get("/api/arena/battles").json()) == 2  # the refused battle left nothing behind


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_the_page_reveals_the_names_after_the_vote(arena_app, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    runner, url, job = arena_app
    runner.wait(60)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1100})
        assert context.request.post(url + "login", form={"username": "me", "password": TOKEN}).ok
        page = context.new_page()
        page.goto(url)
        page.get_by_role("tab", name="Arena").click()
        for field, text in (("arena-first", "checkpoint-1"), ("arena-second", "checkpoint-3")):
            page.locator(f"#{field} input").click()
            page.locator("[role=option]").filter(has_text=text).first.click()
        page.locator("#arena-prompt textarea").fill("Who are you?")
        page.locator("#arena-battle").click()
        page.wait_for_function(
            "() => document.querySelector('#arena-left textarea').value && "
            "document.querySelector('#arena-right textarea').value",
            timeout=120_000,
        )
        assert "checkpoint" not in page.locator("#arena-notice").inner_text()  # no names before the vote
        vote = page.locator("#arena-vote-right")
        vote.wait_for(state="visible")
        page.wait_for_function("() => !document.querySelector('#arena-vote-right').disabled", timeout=10_000)
        vote.click()
        page.get_by_text("You voted").wait_for(timeout=30_000)
        reveal = page.locator("#arena-notice").inner_text()
        assert "A was" in reveal and "checkpoint-1" in reveal and "checkpoint-3" in reveal
        page.wait_for_function("() => document.querySelector('#arena-vote-right').disabled", timeout=10_000)
        api = httpx.Client(base_url=url, headers=AUTH, timeout=30)
        board = api.get("/api/arena/leaderboard").json()["standings"]  # the API test's battle may be in it
        wait_for(lambda: len(table_rows(page, "arena-leaderboard")) == len(board), 10, "the leaderboard's rows")
        rows = table_rows(page, "arena-leaderboard")
        assert [(r[0], int(r[1]), int(r[2]), int(r[7])) for r in rows] == [
            (s["label"], s["battles"], s["wins"], round(s["elo"])) for s in board
        ]
        browser.close()
    latest = api.get("/api/arena/battles", params={"limit": 1}).json()[0]
    assert latest["vote"] == "right" and latest["right"]["model"] is not None  # B, whichever model it was
    assert {latest["left"]["model"].split("/")[-1], latest["right"]["model"].split("/")[-1]} == {
        "checkpoint-1",
        "checkpoint-3",
    }
