"""Share links tried as an attacker would: forged, swapped, revoked, expired and deleted-run tokens,
path tricks, and a share token offered to every other door (as a bearer token and as a cookie)."""

from __future__ import annotations

import socket
import sqlite3
import time

import httpx

from tests.e2e.conftest import TOKEN, ServerThread, logged_in, wait_for
from tests.support.chat_server import CHECKPOINT, JOB, OTHER_JOB, api_app, chat_body
from tests.support.fake_engine import FakeEngine


def share(studio, model: str = JOB, **extra) -> dict:
    answer = studio.api().post("/api/train/share", json={"model": model, **extra})
    assert answer.status_code == 201, answer.text
    return answer.json()


def refused_everywhere(studio, token: str, status: int, words: str) -> None:
    """The page, the model list and a chat with ``token`` all fail with ``status``; no engine call."""
    client = studio.plain()
    calls = len(studio.engine.calls)
    page = client.get(f"/s/{token}")
    assert page.status_code == status and page.headers["content-type"].startswith("text/html")
    assert words in page.text and "<h1>Link not available</h1>" in page.text
    for answer in (
        client.get(f"/s/{token}/v1/models"),
        client.get(f"/s/{token}/v1/models/{JOB}"),
        client.post(f"/s/{token}/v1/chat/completions", json=chat_body()),
    ):
        assert answer.status_code == status, answer.text
        error = answer.json()["error"]
        assert words in error["message"] and error["code"] in ("invalid_share_link", "share_link_gone")
    assert len(studio.engine.calls) == calls


def test_forged_and_swapped_tokens(chat_studio):
    mine, other = share(chat_studio), share(chat_studio, OTHER_JOB)
    link_id, sig = mine["token"].split(".")
    flipped = sig[:-1] + ("A" if sig[-1] != "A" else "B")
    for token in (
        f"{link_id}.{flipped}",
        f"{link_id}.{other['token'].split('.')[1]}",
        f"{other['id']}.{sig}",
        f"{link_id}.{'A' * 43}",
        link_id,
        f"{link_id}.",
        f"{link_id}.{sig}x",
        f"{link_id.upper()}.{sig}",
        "0" * 16 + "." + sig,
        "x" * 5000,
        TOKEN,
    ):
        refused_everywhere(chat_studio, token, 403, "not valid")


def test_revoked_expired_and_deleted(chat_studio):
    revoked = share(chat_studio)
    assert chat_studio.api().delete(f"/api/train/share/{revoked['id']}").status_code == 200
    refused_everywhere(chat_studio, revoked["token"], 403, "revoked")

    expired = share(chat_studio, expires_in_hours=1)
    with sqlite3.connect(chat_studio.settings.db_path) as db:
        db.execute("UPDATE share_links SET expires_at = ? WHERE id = ?", (time.time() - 1, expired["id"]))
    refused_everywhere(chat_studio, expired["token"], 403, "expired")

    doomed_job = "job_20250104_090000_2a2b2c2d"
    chat_studio.runner.store.create_run(doomed_job, {}, str(chat_studio.settings.runs_dir / doomed_job), "completed")
    chat_studio.engine.add(doomed_job)
    doomed = share(chat_studio, doomed_job)
    assert chat_studio.plain().get(doomed["url_path"]).status_code == 200
    chat_studio.runner.store.delete_run(doomed_job)
    refused_everywhere(chat_studio, doomed["token"], 404, "no longer exists")


def test_a_checkpoint_link_grants_only_that_checkpoint(chat_studio):
    link = share(chat_studio, CHECKPOINT)
    client, base = chat_studio.plain(), link["api_base_path"]
    assert [m["id"] for m in client.get(f"{base}/models").json()["data"]] == [CHECKPOINT]
    for other in (JOB, "base", OTHER_JOB, f"{JOB}/checkpoint-1", f"{CHECKPOINT}/../..", "../" + CHECKPOINT):
        answer = client.post(f"{base}/chat/completions", json=chat_body() | {"model": other})
        assert answer.status_code == 404, other
        if ".." not in other:  # httpx would normalize the path (raw paths: test_path_tricks_in_the_token)
            assert client.get(f"{base}/models/{other}").status_code == 404
    assert chat_studio.engine.calls == []


DOORS = [
    ("GET", "/api/train/status"),
    ("GET", "/api/train/runs"),
    ("GET", f"/api/train/runs/{JOB}"),
    ("GET", "/api/train/share"),
    ("POST", "/api/train/share"),
    ("POST", "/api/train/stop"),
    ("GET", "/v1/models"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/config"),
    ("GET", "/gradio_api/info"),
    ("GET", "/gradio_api/openapi.json"),
]


def test_a_share_token_opens_no_other_door(chat_studio):
    link = share(chat_studio)
    token = link["token"]
    headers = {"Authorization": f"Bearer {token}"}
    cookie_id = chat_studio.gradio_cookie_id
    cookies = {f"access-token-{cookie_id}": token, f"access-token-unsecure-{cookie_id}": token, "share": token}
    for method, path in DOORS:
        for client in (
            httpx.Client(base_url=chat_studio.url, headers=headers, timeout=30),
            httpx.Client(base_url=chat_studio.url, cookies=cookies, timeout=30),
        ):
            answer = client.request(method, path, json=chat_body() | {"model": JOB})
            assert answer.status_code in (401, 404, 405), (method, path, answer.status_code)
            assert JOB not in answer.text and "learning_rate" not in answer.text
    assert chat_studio.engine.calls == []
    real = logged_in(chat_studio.url)  # control: a real login cookie has one of those names and opens /config
    assert {c for c in real.cookies.keys()} & set(cookies) and real.get("/config").status_code == 200
    page = chat_studio.plain().get(link["url_path"])
    assert "set-cookie" not in page.headers  # the page hands out nothing reusable


def raw_get(url: str, target: str) -> tuple[int, str]:
    """GET ``target`` exactly as written (no client-side normalization of ``..`` or ``%2F``)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def test_path_tricks_in_the_token(chat_studio):
    token = share(chat_studio)["token"]
    for target in (
        f"/s/{token}/../../api/train/runs",
        f"/s/{token}/v1/../../../api/train/runs",
        f"/s/{token}%2F..%2F..%2Fapi%2Ftrain%2Fruns",
        f"/s/{token}/v1/models/../../../../api/train/runs",
        f"/s/{token}/v1/models/%2e%2e/%2e%2e/%2e%2e/%2e%2e/api/train/runs",
        "/s/..%2F..%2Fapi%2Ftrain%2Fruns",
        f"/s/{token}/..%2F..%2F..%2Fv1%2Fmodels",
        f"/s/{token}%00/v1/models",
        f"/s/{token}/v1/models%00",
        f"/s/{token};/v1/models",
        "/s/%2e%2e/v1/models",
        "/s/./v1/models",
        "/s//v1/models",
    ):
        status, body = raw_get(chat_studio.url, target)
        assert status in (400, 403, 404, 405), (target, status, body[:300])
        assert OTHER_JOB not in body and '"phase"' not in body and "learning_rate" not in body, target


def test_failed_share_tokens_and_v1_tokens_are_throttled(tmp_path, caplog):
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path, api_token=TOKEN)
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path))
    with ServerThread(api_app(settings, runner, FakeEngine(), throttle_limit=4)) as server:
        client = httpx.Client(base_url=server.url.rstrip("/"), timeout=30)
        for path in ("/v1/models", "/api/train/status") * 5:  # readiness probes carry no token: not guesses
            assert client.get(path).status_code == 401
        assert "failed API token" not in caplog.text
        assert client.get("/s/0123456789abcdef.forged").status_code == 403
        assert client.get("/s/0123456789abcdef.forged/v1/models").status_code == 403
        assert client.get("/v1/models", headers={"Authorization": "Bearer wrong-token-012345"}).status_code == 401
        assert client.post("/v1/chat/completions", json={}, headers={"Authorization": "Bearer x"}).status_code == 401
        blocked = client.get("/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})
        assert blocked.status_code == 429 and 1 <= int(blocked.headers["Retry-After"]) <= 60
        assert blocked.json()["error"]["type"] == "rate_limit_error"  # OpenAI's shape on /v1 and /s/
        assert client.get("/api/train/status", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 429
        assert client.get("/s/0123456789abcdef.also-forged-but-secret-looking/v1/models").status_code == 429
    assert "also-forged" not in caplog.text and "/s/***/v1/models" in caplog.text  # tokens never logged


def test_share_link_holders_cannot_queue_without_bound(chat_studio):
    from api.openai_answer import CHAT_SLOTS

    chat_studio.engine.token_delay_s = 0.1
    base = chat_studio.url + share(chat_studio)["api_base_path"]
    body = chat_body(" ".join(["word"] * 100), stream=True)
    open_streams = []
    try:
        for _ in range(CHAT_SLOTS["share"]):
            client = httpx.Client(timeout=30)
            stream = client.stream("POST", f"{base}/chat/completions", json=body)
            answer = stream.__enter__()
            assert answer.status_code == 200
            open_streams.append((client, stream))
        one_more = httpx.post(f"{base}/chat/completions", json=chat_body(), timeout=30)
        assert one_more.status_code == 429 and one_more.json()["error"]["type"] == "rate_limit_error"
        assert one_more.headers["retry-after"]
        owner = chat_studio.api().post("/v1/chat/completions", json=chat_body())  # the owner's door has its own slots
        assert owner.status_code == 200
    finally:
        for client, stream in open_streams:
            stream.__exit__(None, None, None)
            client.close()
    wait_for(
        lambda: httpx.post(f"{base}/chat/completions", json=chat_body(), timeout=30).status_code == 200,
        10,
        "the slots to be freed",
    )
