"""``POST /v1/audio/transcriptions`` over the real chat engine and inference worker (the API alone on
a loopback port): the ``openai`` client's transcript of a clip equals the run's own ``generate`` (a
LoRA run of the tiny Whisper, its language), as json, text and verbose_json, through a share link
too; and, raw HTTP as an attacker would send it, every refusal a 4xx in OpenAI's error shape (no
token, a forged link, another model's link, a chat model, a file that is no audio, a huge file, an
empty one, unknown and path-like ids, formats it does not write), never a 500."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.e2e.conftest import TOKEN, ServerThread
from tests.support.chat_server import api_app
from tests.support.speech_data import CLIPS
from tests.support.speech_runs import add_run, lora_speech_run

STT = "job_20250107_090000_6a6b6c6d"  # a LoRA run of the tiny Whisper
CHAT = "job_20250105_090000_5a5b5c5d"  # a chat run (fake adapter files: it is never loaded)
WAV = (CLIPS / "2.wav").read_bytes()


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_whisper_dir):
    """(url, settings) of the API with a real engine, the run ``STT`` and the chat run ``CHAT``."""
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.settings import Settings

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("stt"), api_token=TOKEN, allowed_paths=str(tiny_whisper_dir.parent)
    )
    store = RunStore(settings.db_path)
    chat = settings.runs_dir / CHAT
    chat.mkdir(parents=True)
    (chat / "adapter_model.safetensors").write_bytes(b"w")
    (chat / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
    store.create_run(CHAT, {"model_name": "org/base"}, str(chat), "completed")
    add_run(store, STT, lora_speech_run(tiny_whisper_dir, settings.runs_dir / STT), str(tiny_whisper_dir))
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    engine = ChatEngine(runner, settings)  # the real inference worker
    with ServerThread(api_app(settings, runner, engine)) as server:
        yield server.url.rstrip("/"), settings
        engine.unload()
        runner.stop(save=False)
        runner.wait(10)


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"} and "Traceback" not in response.text
    return response.json()["error"]


def _link(url: str, model: str) -> str:
    made = httpx.post(f"{url}/api/train/share", json={"model": model}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert made.status_code == 201, made.text
    return made.json()["api_base_path"]


@pytest.mark.slow
def test_the_openai_client_gets_the_runs_own_transcript_through_the_token_and_a_share_link(served, tiny_whisper_dir):
    from trainer_core.data.audio import read_audio
    from trainer_core.kinds.speech_to_text.serve import load_speech_model, transcribe
    from trainer_core.serving.schemas import ModelChoice

    url, settings = served
    folder = settings.runs_dir / STT
    choice = ModelChoice(
        id=STT, label=STT, kind="final", base_model=str(tiny_whisper_dir), path=str(folder), adapter=True
    )
    model, processor, _ = load_speech_model(choice, settings.models_dir, "cpu")
    clip = read_audio(str(CLIPS / "2.wav"), sampling_rate=16000)
    expected, _ = transcribe(model, processor, clip, "en", "transcribe")  # the run's own generate, its language
    assert expected  # a non-empty transcript to compare
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
    assert {m.id: m.serves for m in client.models.list()} == {
        "base": "transcriptions",
        STT: "transcriptions",
        CHAT: "chat",
    }
    got = client.audio.transcriptions.create(model=STT, file=("2.wav", WAV))
    assert got.text == expected
    text = client.audio.transcriptions.create(model=STT, file=("2.wav", WAV), response_format="text")
    assert text.strip() == expected
    verbose = client.audio.transcriptions.create(model=STT, file=("2.wav", WAV), response_format="verbose_json")
    assert verbose.text == expected and verbose.language == "en" and abs(verbose.duration - 2.9) < 0.1
    assert verbose.segments[0].end == verbose.duration
    shared = openai.OpenAI(base_url=url + _link(url, STT), api_key="unused", max_retries=0)
    assert shared.audio.transcriptions.create(model=STT, file=("clip.wav", WAV)).text == expected


def test_refusals_are_4xx_in_openai_shape(served):
    url, _ = served
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def post(data, files=None, headers=auth, path="/v1/audio/transcriptions"):
        files = {"file": ("clip.wav", WAV)} if files is None else files
        return httpx.post(f"{url}{path}", headers=headers, data=data, files=files, timeout=60)

    assert _error(post({"model": STT}, headers={}), 401)["code"] == "invalid_api_key"
    assert _error(post({"model": STT}, headers={"Authorization": "Bearer nope"}), 401)
    for model in ("job_nope", "../../etc/passwd", "/etc/passwd", f"{STT}/../../x", f"{STT}/checkpoint-../1"):
        error = _error(post({"model": model}), 404)
        assert error["code"] == "model_not_found" and error["param"] == "model"
    chat = _error(post({"model": CHAT}), 400)
    assert chat["code"] == "not_a_speech_to_text_model" and chat["param"] == "model"
    assert "transcriptions" in chat["message"]
    for data, files, param in (
        ({"model": STT}, {"file": ("notes.wav", b"these are notes, not audio")}, "file"),
        ({"model": STT}, {"file": ("big.wav", b"RIFF" + b"\0" * (25 * 1024 * 1024))}, "file"),
        ({"model": STT}, {"file": ("empty.wav", b"")}, "file"),
        ({"model": STT}, {"other": ("clip.wav", WAV)}, "file"),
        ({}, None, "model"),
        ({"model": STT, "response_format": "srt"}, None, "response_format"),
        ({"model": STT, "language": "x" * 41}, None, "language"),
        ({"model": "m" * 301}, None, "model"),
    ):
        assert _error(post(data, files), 400)["param"] == param, (data, param)
    huge = _error(post({"model": STT}, {"file": ("big.wav", b"RIFF" + b"\0" * (25 * 1024 * 1024))}), 400)
    assert huge["code"] == "file_too_large" and "25 MB" in huge["message"]
    other = _link(url, CHAT)  # a link opens only its own model
    assert _error(post({"model": STT}, headers={}, path=f"{other}/audio/transcriptions"), 404)["code"] == (
        "model_not_found"
    )
    on_chat = _error(post({}, headers={}, path=f"{other}/audio/transcriptions"), 400)
    assert on_chat["code"] == "not_a_speech_to_text_model"
    forged = other.replace(other.split("/")[2], "0123456789abcdef." + "A" * 43)
    assert _error(post({}, headers={}, path=f"{forged}/audio/transcriptions"), 403)["code"] == "invalid_share_link"
