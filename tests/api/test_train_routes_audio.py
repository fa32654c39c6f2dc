"""Audio data through the API's doors (``POST /api/train/preflight`` and ``/api/train/start``, with the
token, in-process with TestClient): the check's audio line for the shared demo, and a clip that
cannot be used refused by file and row at Check and at Start, also one outside the allowed folders
(its contents never answered). Toy audio kinds stand for the real ones; the check worker answers in
this process so that it sees them (``tests.support.audio_kinds.InProcessChecker``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.audio_kinds import AUDIO_CHAT, SPEECH, InProcessChecker, bad_clip_data, registered, toy_model

TOKEN = "audio-doors-token-0123456789"
CANARY = "CANARY-audio-9c1e-must-not-leak"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, datasets_dir: Path):
    """(a TestClient of the whole app sending the token, an allowed folder, a toy speech model in it)."""
    from fastapi.testclient import TestClient

    from server import build_app
    from trainer_core.admission import check_worker
    from trainer_core.settings import Settings

    root = tmp_path_factory.mktemp("audio-doors")
    allowed = root / "allowed"
    allowed.mkdir()
    settings = Settings(data_dir=root / "studio", allowed_paths=f"{allowed}:{datasets_dir}", api_token=TOKEN)
    with pytest.MonkeyPatch.context() as patch, registered(SPEECH, AUDIO_CHAT):
        patch.setattr(check_worker, "_checker", InProcessChecker())
        with TestClient(build_app(settings)) as test_client:
            test_client.headers["Authorization"] = f"Bearer {TOKEN}"
            yield test_client, allowed, toy_model(allowed / "speech-model", SPEECH)


def test_the_check_reports_the_demos_clips(client, datasets_dir: Path) -> None:
    api, _, speech = client
    body = {"model_name": str(speech), "local_datasets": [str(datasets_dir / "mllm_audio_demo.json")]}
    report = api.post("/api/train/preflight", json=body)
    assert report.status_code == 200, report.text
    assert report.json()["errors"] == []
    assert report.json()["audio"].startswith("audio: 3 clips in 3 rows, 12.8 s in all, longest 5.9 s (row 3, 3.flac)")


@pytest.mark.parametrize(
    ("clip", "expected"),
    [
        ("missing.wav", "bad.json, row 2: audio clip missing.wav was not found"),
        ("garbage.wav", "bad.json, row 2: audio clip garbage.wav cannot be read as audio"),
        ("../outside/canary.wav", "bad.json, row 2: audio clip: "),
    ],
)
def test_a_bad_clip_is_refused_by_file_and_row_at_check_and_start(client, clip: str, expected: str) -> None:
    api, allowed, speech = client
    outside = allowed.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "canary.wav").write_text(CANARY)
    body = {"model_name": str(speech), "local_datasets": [str(bad_clip_data(allowed, clip))], "max_steps": 1}
    checked = api.post("/api/train/preflight", json=body)
    assert checked.status_code == 200 and CANARY not in checked.text
    (error,) = checked.json()["errors"]
    assert error["code"] == "data_error" and error["message"].startswith(expected), error
    started = api.post("/api/train/start", json=body)
    assert started.status_code == 400 and CANARY not in started.text, started.text
    assert expected in started.text and api.get("/api/train/status").json()["is_training_running"] is False
    if "outside" in clip:
        assert "outside the allowed folders" in error["message"]
    assert api.post("/api/train/start", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
