"""The token cache through the launched app (``api_app``, cache on in its data dir): the check's
exact pass stores the tokenized split, Start on the same data and settings reads it (the run's log
says "data: cache hit <key>"), ``/api/data/cache`` lists and deletes it, and the routes refuse an
attacker: no token, traversal in the key, a link planted in the cache that points outside."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.api_server import API_AUTH as AUTH
from tests.support.api_server import app_for
from tests.support.train_api import start_job, wait_end

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app_proc(api_app):
    """The launched app the HTTP tests share; ``data``: its data dir."""
    proc = app_for(api_app, "token-cache")
    proc.data = api_app.files.parent / "data"
    return proc


def _rows_file(folder: Path) -> Path:
    """A generated conversation file of 300 rows, different from every other test's."""
    file = folder / "cache-rows.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"Add {i} and {i}."}, {"role": "assistant", "content": str(2 * i)}]}
        for i in range(300)
    ]
    file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return file


def test_check_then_start_hits_the_cache_and_the_log_says_so(app_proc, tiny_model_dir):
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=120)
    body = {
        "model_name": str(tiny_model_dir),
        "local_datasets": [str(_rows_file(app_proc.folder))],
        "max_seq_length": 64,
        "batch_size": 4,
        "max_steps": 2,
    }
    report = api.post("/api/train/preflight", json=body)
    assert report.status_code == 200, report.text
    listed = [e for e in api.get("/api/data/cache").json() if e["sources"] == ["cache-rows.jsonl"]]
    assert len(listed) == 1 and listed[0]["rows"] == 300 and listed[0]["size_bytes"] > 0
    key = listed[0]["key"]
    assert listed[0]["model"] == tiny_model_dir.name and listed[0]["split"] == "train"

    start_job(api, body)
    ended = wait_end(api)
    assert ended["phase"] == "completed", ended["error"]
    log = (Path(ended["details"]["output_dir"]) / "worker.log").read_text()
    assert f"data: cache hit {key}, 300 rows, " in log
    assert ended["details"]["token_cache"]["hit"] is True and ended["details"]["token_cache"]["seconds"] < 5

    assert api.delete(f"/api/data/cache/{key}").json()["key"] == key
    assert key not in [e["key"] for e in api.get("/api/data/cache").json()]
    gone = api.delete(f"/api/data/cache/{key}")
    assert gone.status_code == 404 and gone.json()["code"] == "unknown_cache_entry"


def test_the_cache_routes_refuse_an_attacker(app_proc, tmp_path):
    bare = httpx.Client(base_url=app_proc.url, timeout=30)
    wrong = httpx.Client(base_url=app_proc.url, headers={"Authorization": "Bearer not-the-token-at-all"}, timeout=30)
    for client, method, path in (
        (bare, "GET", "/api/data/cache"),
        (bare, "DELETE", "/api/data/cache/" + "a" * 24),
        (wrong, "GET", "/api/data/cache"),
    ):
        assert client.request(method, path).status_code in (401, 429), (method, path)  # 429: the login throttle

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "entry.json").write_text("{}")
    (outside / "keep.txt").write_text("precious")
    planted = app_proc.data / "token_cache" / ("d" * 24)
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.symlink_to(outside)
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    for path in (
        "/api/data/cache/..%2F..%2Fruns",
        "/api/data/cache/%2e%2e",
        "/api/data/cache/" + "A" * 24,
        "/api/data/cache/" + "a" * 25,
        "/api/data/cache/" + "a" * 23 + "%2F",
    ):
        answer = api.delete(path)
        assert answer.status_code in (404, 405, 422), (path, answer.status_code)
    refused = api.delete("/api/data/cache/" + "d" * 24)
    assert refused.status_code == 400 and refused.json()["code"] == "path_not_allowed"
    assert (outside / "keep.txt").read_text() == "precious" and (outside / "entry.json").exists()
    planted.unlink()


def test_the_page_deletes_listed_entries_only(studio, tmp_path):
    """The Train tab's cache accordion through raw Gradio calls (logged in): junk and traversal in
    the key are refused in the notice, naming the box; a link planted in the cache is not followed."""
    from tests.e2e.conftest import logged_in
    from tests.support.raw_gradio import RawGradio, error_text

    settings, _, url = studio
    outside = tmp_path / "outside-page"
    outside.mkdir()
    (outside / "entry.json").write_text("{}")
    planted = Path(settings.data_dir) / "token_cache" / ("e" * 24)
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.symlink_to(outside)
    raw = RawGradio(logged_in(url))
    delete = raw.fn_index("token_cache_delete")
    for junk in ("", "../../etc", "e" * 24, "<img src=x onerror=alert(1)>", "f" * 24):
        answer = raw.call(delete, [junk])
        assert answer["success"], error_text(answer)
        notice = json.dumps(answer["output"]["data"][2])
        assert "Cache entry:" in notice and "<img" not in notice, (junk, notice)
    assert (outside / "entry.json").exists() and planted.is_symlink()
    listed = raw.call(raw.fn_index("token_cache_list"), [])
    assert listed["success"] and "Nothing cached yet" in json.dumps(listed["output"]["data"][1])
    planted.unlink()
