"""A vision-language run through the HTTP API of the real app process: the pre-flight
names the family and what the images cost, Start trains 3 steps of the tiny Qwen2-VL on
``mllm_demo.json``, and image references that point out of the allowed folders (a relative
``../`` path, an absolute path, a symlink) or at something that is no image are refused by file
and row at the check and at Start, as an attacker would send them, without reading the file."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.conftest import CANARY, wait_for
from tests.support.api_server import API_AUTH as AUTH
from tests.support.api_server import API_TOKEN as TOKEN
from tests.support.api_server import app_with_media
from tests.support.raw_gradio import RawGradio, file_value

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app_proc(api_app, tmp_path_factory):
    """The launched app the HTTP tests share (``api_app``); ``data`` (inside the allowed folders)
    holds the demo files, ``secret`` (outside every allowed folder) a canary."""
    return app_with_media(api_app, "vision", "pics", "canary.png", tmp_path_factory.mktemp("vision-secret"))


@pytest.fixture(scope="module")
def vision_run(app_proc, datasets_dir, tiny_vl_dir) -> dict:
    """The pre-flight report and the final status of 3 steps of the tiny Qwen2-VL on the demo images."""
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=120)
    body = {
        "model_name": str(tiny_vl_dir),
        "local_datasets": [str(datasets_dir / "mllm_demo.json")],
        "max_steps": 3,
        "batch_size": 2,
        "vision_image_size": 224,
    }
    report = api.post("/api/train/preflight", json=body)
    started = api.post("/api/train/start", json=body)
    assert started.status_code == 200 and started.json()["status"] == "queued", started.text
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 300, "the run's end")
    return {"report": report, "status": api.get("/api/train/status").json()}


def test_a_vision_run_is_checked_and_trained_over_http(vision_run):
    report, status = vision_run["report"], vision_run["status"]
    assert report.status_code == 200, report.text
    found = report.json()
    assert found["errors"] == [] and found["architecture"] == "Qwen2VLForConditionalGeneration"
    assert found["vision"].startswith("vision-language: Qwen2-VL;") and "8 images" in found["vision"]
    assert "images shrunk to at most 224 px" in found["vision"]
    assert status["phase"] == "completed", (status["message"], status["error"])
    out = Path(status["details"]["output_dir"])
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert status["details"]["vision"] == "Qwen2-VL" and status["details"]["images"] == 8
    assert json.loads((out / "run.json").read_text())["model_structure"]["adapted"]["count"] == 14


def test_the_run_answers_about_an_image_through_the_openai_client(app_proc, vision_run, datasets_dir):
    job = vision_run["status"]["job_id"]
    client = openai.OpenAI(base_url=f"{app_proc.url}/v1", api_key=TOKEN, max_retries=0, timeout=300)
    picture = base64.b64encode((datasets_dir / "mllm_demo_data" / "2.jpg").read_bytes()).decode()
    parts = [
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{picture}"}},
        {"type": "text", "text": "Who is he?"},
    ]
    settings = {"max_tokens": 4, "temperature": 0}
    seen = client.chat.completions.create(model=job, messages=[{"role": "user", "content": parts}], **settings)
    text = client.chat.completions.create(model=job, messages=[{"role": "user", "content": "Who is he?"}], **settings)
    # the image's tokens (a 300 x 166 picture: 4-16 merged patches with the tiny processor) are in the prompt
    assert 4 <= seen.usage.prompt_tokens - text.usage.prompt_tokens - 2 <= 16
    assert seen.choices[0].finish_reason in ("stop", "length") and seen.usage.completion_tokens >= 1
    remote = [{"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/a.jpg"}}]
    with pytest.raises(openai.BadRequestError, match="does not fetch remote image URLs"):
        client.chat.completions.create(model=job, messages=[{"role": "user", "content": remote}], **settings)
    broken = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"no").decode()}}]
    with pytest.raises(openai.BadRequestError, match="cannot be read as an image"):
        client.chat.completions.create(model=job, messages=[{"role": "user", "content": broken}], **settings)


def test_image_paths_out_of_the_allowed_folders_are_refused_by_row(app_proc, tiny_vl_dir):
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=120)
    data, secret = app_proc.data, app_proc.secret
    link = data / "pics" / "link.png"
    if not link.exists():
        link.symlink_to(secret / "canary.png")
    bad = {
        "relative": os.path.relpath(secret / "canary.png", data),
        "absolute": str(secret / "canary.png"),
        "symlink": "pics/link.png",
        "not an image": "data:image/png;base64," + base64.b64encode(CANARY.encode()).decode(),
    }
    for case, reference in bad.items():
        rows = [
            {
                "messages": [{"role": "user", "content": "<image>Fine"}, {"role": "assistant", "content": "Yes."}],
                "images": ["pics/1.jpg"],
            },
            {
                "messages": [{"role": "user", "content": "<image>Who?"}, {"role": "assistant", "content": "Me."}],
                "images": [reference],
            },
        ]
        path = data / f"{case.replace(' ', '_')}.json"
        path.write_text(json.dumps(rows))
        body = {"model_name": str(tiny_vl_dir), "local_datasets": [str(path)], "max_steps": 1}
        started = api.post("/api/train/start", json=body)
        assert started.status_code == 400, (case, started.text)
        message = started.json()["detail"]
        assert message.startswith(f"{path.name}, row 2: image"), (case, message)
        expected = "cannot be read as an image" if case == "not an image" else "is outside the allowed folders"
        assert expected in message and CANARY not in message, (case, message)
        checked = api.post("/api/train/preflight", json=body).json()
        assert [e["code"] for e in checked["errors"]] == ["data_error"] and CANARY not in json.dumps(checked)
    assert not api.get("/api/train/status").json()["is_training_running"]


def test_a_decompression_bomb_and_a_truncated_jpeg_are_refused_by_row_in_every_kind(app_proc, tiny_vl_dir):
    """A 30,000 x 30,000 PNG (~110 KB) as a path, as Hub-style ``{"bytes": ...}`` in a
    Parquet file and as a ``data:`` URL gave a 500 at /preflight, /start and /queue (PIL's own bomb error);
    a truncated JPEG passed both and failed in training. Each is now refused by file and row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.support import bad_images

    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=120)
    data = app_proc.data
    bomb = bad_images.bomb_png()
    (data / "pics" / "bomb.png").write_bytes(bomb)
    bad_images.truncated_copy(data / "pics" / "2.jpg", data / "pics" / "cut.jpg")
    too_big = "is over 128,000,000 pixels, more than the limit of 64,000,000: resize it"
    cases = {
        "bomb path": ("pics/bomb.png", f"image bomb.png {too_big}"),
        "bomb data URL": ("data:image/png;base64," + base64.b64encode(bomb).decode(), f"image (data: URL) {too_big}"),
        "bomb bytes": ({"bytes": bomb, "path": None}, f"image (data: URL) {too_big}"),
        "truncated jpeg": (
            "pics/cut.jpg",
            "image cut.jpg cannot be read as an image (OSError: image file is truncated",
        ),
    }
    for case, (reference, said) in cases.items():
        turns = [{"role": "user", "content": "<image>Who?"}, {"role": "assistant", "content": "Me."}]
        if isinstance(reference, dict):  # a Hub Image column's struct of bytes: Parquet, as the Hub ships it
            path = data / "bomb_bytes.parquet"
            images = [[{"bytes": (data / "pics" / "1.jpg").read_bytes(), "path": None}], [reference]]
            pq.write_table(pa.table({"messages": [turns, turns], "images": images}), path)
        else:
            path = data / f"{case.replace(' ', '_')}.json"
            path.write_text(
                json.dumps([{"messages": turns, "images": ["pics/1.jpg"]}, {"messages": turns, "images": [reference]}])
            )
        body = {"model_name": str(tiny_vl_dir), "local_datasets": [str(path)], "max_steps": 1}
        checked = api.post("/api/train/preflight", json=body)
        started, queued = api.post("/api/train/start", json=body), api.post("/api/train/queue", json=body)
        assert checked.status_code == 200 and started.status_code == queued.status_code == 400, (case, started.text)
        assert [e["code"] for e in checked.json()["errors"]] == ["data_error"], (case, checked.text)
        message = started.json()["detail"]
        assert checked.json()["errors"][0]["message"] == message == queued.json()["detail"], case
        assert message.startswith(f"{path.name}, row 2: {said}"), (case, message)
    assert not api.get("/api/train/status").json()["is_training_running"]


def test_the_chat_image_box_takes_no_server_path(app_proc, datasets_dir):
    """The Chat tab's image event, called over Gradio's raw queue with a file value naming a file
    outside every allowed folder (and one inside): refused before the handler, nothing echoed."""
    client = httpx.Client(base_url=app_proc.url, timeout=60)
    assert client.post("/login", data={"username": "me", "password": TOKEN}).status_code == 200  # the page's login
    raw = RawGradio(client)
    box = next(c["id"] for c in raw.config["components"] if c.get("props", {}).get("elem_id") == "chat-image")
    event = next(d["id"] for d in raw.dependencies if d["inputs"] == [box] and len(d["outputs"]) == 2)
    for target in (app_proc.secret / "canary.png", datasets_dir / "mllm_demo_data" / "1.jpg"):
        answer = raw.call(event, [file_value(str(target))])
        assert not answer["success"] and CANARY not in json.dumps(answer), answer
