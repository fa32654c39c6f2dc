"""An audio-in chat run through the HTTP API of the real app process: the pre-flight names the kind,
the family and what the clips cost, Start trains 3 full fine-tuning steps of the tiny Qwen2-Audio on
``mllm_audio_demo.json`` (the audio tower's and the language model's weights both change), and the run answers a clip sent as an OpenAI ``input_audio`` part through
the ``openai`` client (a clip that is not audio refused); clip paths out of the allowed folders are
refused by file and row at the check, as an attacker would send them."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import httpx
import openai
import pytest
from safetensors.torch import load_file

from tests.e2e.conftest import CANARY, wait_for
from tests.support.api_server import API_AUTH as AUTH
from tests.support.api_server import API_TOKEN as TOKEN
from tests.support.api_server import app_with_media

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app_proc(api_app, tmp_path_factory):
    """The launched app the HTTP tests share (``api_app``); ``data`` (inside the allowed folders)
    holds the demo files, ``secret`` (outside every allowed folder) a canary."""
    return app_with_media(api_app, "audio-chat", "sounds", "canary.wav", tmp_path_factory.mktemp("audio-chat-secret"))


@pytest.fixture(scope="module")
def audio_run(app_proc, datasets_dir, tiny_audio_chat_dir) -> dict:
    """The pre-flight report and the final status of 3 full steps of the tiny Qwen2-Audio on the demo clips."""
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=120)
    body = {
        "model_name": str(tiny_audio_chat_dir),
        "local_datasets": [str(datasets_dir / "mllm_audio_demo.json")],
        "training_type": "full",
        "max_steps": 3,
        "batch_size": 2,
    }
    report = api.post("/api/train/preflight", json=body)
    started = api.post("/api/train/start", json=body)
    assert started.status_code == 200 and started.json()["status"] == "queued", started.text
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 300, "the run's end")
    return {"report": report, "status": api.get("/api/train/status").json()}


def test_an_audio_chat_run_is_checked_and_trained_over_http(audio_run, tiny_audio_chat_dir):
    report, status = audio_run["report"], audio_run["status"]
    assert report.status_code == 200, report.text
    found = report.json()
    assert found["errors"] == [] and found["architecture"] == "Qwen2AudioForConditionalGeneration"
    assert found["vision"].startswith("audio chat: Qwen2-Audio; padded batches")  # the kind's check line
    assert "3 clips, 12.8 s in all (2.9 to 5.9 s), 25 tokens per second of audio" in found["vision"]
    assert status["phase"] == "completed", (status["message"], status["error"])
    out = Path(status["details"]["output_dir"])
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert status["details"]["audio_chat"] == "Qwen2-Audio" and status["details"]["clips"] == 3
    assert json.loads((out / "processor_config.json").read_text())["processor_class"] == "Qwen2AudioProcessor"
    before, after = load_file(tiny_audio_chat_dir / "model.safetensors"), load_file(out / "model.safetensors")
    changed = [
        name for name, value in after.items() if name in before and not value.float().equal(before[name].float())
    ]
    assert any("audio_tower" in name for name in changed) and any("language_model" in name for name in changed)


def test_the_run_answers_about_a_clip_through_the_openai_client(app_proc, audio_run, datasets_dir):
    job = audio_run["status"]["job_id"]
    client = openai.OpenAI(base_url=f"{app_proc.url}/v1", api_key=TOKEN, max_retries=0, timeout=300)
    clip = base64.b64encode((datasets_dir / "mllm_demo_data" / "2.wav").read_bytes()).decode()
    parts = [{"type": "input_audio", "input_audio": {"data": clip, "format": "wav"}}, {"type": "text", "text": "What?"}]
    settings = {"max_tokens": 4, "temperature": 0}
    heard = client.chat.completions.create(model=job, messages=[{"role": "user", "content": parts}], **settings)
    text = client.chat.completions.create(model=job, messages=[{"role": "user", "content": "What?"}], **settings)
    # 2.9 s of audio: 73 <|AUDIO|> tokens, with "Audio 1: <|audio_bos|>" before and "<|audio_eos|>\n" after
    assert 73 < heard.usage.prompt_tokens - text.usage.prompt_tokens < 85
    assert heard.choices[0].finish_reason in ("stop", "length") and heard.usage.completion_tokens >= 1
    noise = [{"type": "input_audio", "input_audio": {"data": base64.b64encode(b"no sound").decode(), "format": "wav"}}]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=job, messages=[{"role": "user", "content": noise}], **settings)


def test_clip_paths_out_of_the_allowed_folders_are_refused_by_row(app_proc, tiny_audio_chat_dir):
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=120)
    data, secret = app_proc.data, app_proc.secret
    link = data / "sounds" / "link.wav"
    if not link.exists():
        link.symlink_to(secret / "canary.wav")
    bad = {
        "relative": os.path.relpath(secret / "canary.wav", data),
        "absolute": str(secret / "canary.wav"),
        "symlink": "sounds/link.wav",
    }
    for case, reference in bad.items():
        rows = [
            {
                "messages": [{"role": "user", "content": "<audio>Fine"}, {"role": "assistant", "content": "Yes."}],
                "audios": ["sounds/2.wav"],
            },
            {
                "messages": [{"role": "user", "content": "<audio>Who?"}, {"role": "assistant", "content": "Me."}],
                "audios": [reference],
            },
        ]
        path = data / f"bad-{case.replace(' ', '-')}.json"
        path.write_text(json.dumps(rows))
        body = {"model_name": str(tiny_audio_chat_dir), "local_datasets": [str(path)], "max_steps": 1}
        answer = api.post("/api/train/preflight", json=body)
        assert answer.status_code in (200, 422), (case, answer.text)
        assert f"{path.name}, row 2" in answer.text, (case, answer.text)
        assert CANARY not in answer.text, case
