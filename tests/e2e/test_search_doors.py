"""The Search tab's event called raw over Gradio's queue, as an attacker would: passages files outside
the allowed folders (a path, ``..``, a link planted in the uploads folder), 10,000 passages, a chat
model, odd values, a training job that has the machine, and no login at all. Each is answered with
a notice that names the field by its label, nothing is embedded and the canary never shows."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx

from tests.e2e.conftest import CANARY, api, assert_no_canary, logged_in
from tests.support.raw_gradio import RawGradio

CHAT = "job_20250105_090000_5a5b5c5d"  # fake adapter files: never loaded
EMB = "job_20250106_090000_4a4b4c4d"  # a sentence-transformers run folder (modules.json): never loaded
PROMPT = "</script><script>alert(1)</script>& query: "  # the run's query prompt, as the share page carries it


def _runs(settings, store) -> None:
    for job, files in ((CHAT, {}), (EMB, {"modules.json": "[]"})):
        folder = settings.runs_dir / job
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "adapter_model.safetensors").write_bytes(b"w")
        (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
        for name, text in files.items():
            (folder / name).write_text(text)
        if store.get_run(job) is None:
            request = {"model_name": "org/base", "query_prompt": PROMPT if files else None}
            store.create_run(job, request, str(folder), "completed")


def _notice(raw: RawGradio, data: list) -> str:
    answer = raw.call(raw.fn_index("search"), data)
    assert answer["success"], answer
    text = json.dumps(answer)
    assert CANARY not in text and "Traceback" not in text
    return answer["output"]["data"][2]


def test_raw_search_calls_are_refused_with_notices(studio, outside, datasets_dir, monkeypatch):
    settings, runner, url = studio
    _runs(settings, runner.store)
    raw = RawGradio(logged_in(url))
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    link = settings.uploads_dir / "passages.txt"
    link.unlink(missing_ok=True)
    link.symlink_to(outside / "canary.jsonl")
    for path in (
        str(outside / "canary.jsonl"),
        f"{datasets_dir}/../{outside.name}/canary.json",
        str(link),
        "/etc/passwd",
        "\x00",
        "x" * 5000,
    ):
        notice = _notice(raw, [EMB, True, "q", "", path])
        assert "Not searched" in notice and "Passages file" in notice, (path, notice)
    assert "Passages file: no file at" in _notice(raw, [EMB, True, "q", "", str(datasets_dir)])
    many = "\n".join(f"passage {i}" for i in range(10_000))
    assert "Passages: at most 1000 passages in one search, not 10,000" in _notice(raw, [EMB, True, "q", many, ""])
    assert "Model: " in _notice(raw, [CHAT, False, "q", "a", ""]) and "not an embedding model" in _notice(
        raw, [CHAT, False, "q", "a", ""]
    )
    for model in ("../../etc/passwd", "job_nope", None, {"x": 1}, ""):
        assert "Model: " in _notice(raw, [model, False, "q", "a", ""]), model
    assert "Query: type what to search for" in _notice(raw, [EMB, False, " ", "a", ""])
    assert "Passages: give at least one passage" in _notice(raw, [EMB, False, "q", "\n  \n", None])
    assert "Tuned beside base: the base model beside itself" in _notice(raw, ["base", True, "q", "a", ""])
    assert runner.store.get_run(EMB) is not None and runner.status().phase.value == "idle"
    assert_no_canary(settings.data_dir)

    stranger = httpx.Client(base_url=url, timeout=30)  # no login: the queue is closed
    joined = stranger.post(
        "/gradio_api/queue/join",
        json={"data": [EMB, True, "q", "a", str(outside / "canary.jsonl")], "fn_index": raw.fn_index("search"),
              "session_hash": "x"},
    )  # fmt: skip
    assert joined.status_code in (401, 403) and CANARY not in joined.text

    with monkeypatch.context() as patched:  # a training job has the machine (the runner's word for it)
        patched.setattr(runner, "status", lambda **_: SimpleNamespace(is_training_running=True))
        busy = _notice(raw, [EMB, True, "q", "a", ""])
    assert "A training job is running and has the machine" in busy


def test_an_embedding_runs_share_page_is_the_search_page(studio):
    settings, runner, url = studio
    _runs(settings, runner.store)
    made = api(url).post("/api/train/share", json={"model": EMB})
    assert made.status_code == 201, made.text
    page = httpx.get(url + made.json()["url_path"], timeout=30)
    assert page.status_code == 200 and "search only" in page.text and "/v1/embeddings" in page.text
    assert "<script>alert(1)" not in page.text and "\\u003c/script>\\u003cscript>alert(1)" in page.text
    assert '"max_passages": 1000' in page.text and "script-src 'nonce-" in page.headers["content-security-policy"]
    chat = api(url).post("/api/train/share", json={"model": CHAT}).json()["url_path"]
    assert "chat only" in httpx.get(url + chat, timeout=30).text  # a chat run keeps its chat page
