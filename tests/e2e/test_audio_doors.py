"""Audio data through the page's own doors, spoken as raw Gradio queue calls (the page, or an
attacker, would send the same): the dataset preview shows a player and a duration for each clip of
the shared demo, and Start refuses a missing clip by file and row (no run starts); the Chat tab's
audio box takes no clip the server never received (a path outside its upload folders). Toy audio
kinds stand for the real ones; the check worker answers in this process so that it sees them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ServerThread, form_args
from tests.support.audio_kinds import AUDIO_CHAT, SPEECH, InProcessChecker, bad_clip_data, registered, toy_model
from tests.support.raw_gradio import PREVIEW_OUTPUTS, RawGradio, file_value
from tests.support.speech_data import CLIPS


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, datasets_dir: Path):
    """(RawGradio of the whole app on a loopback port, its runner, an allowed folder, a toy speech model)."""
    from server import build_app
    from trainer_core.admission import check_worker
    from trainer_core.settings import Settings

    root = tmp_path_factory.mktemp("audio-page")
    allowed = root / "allowed"
    allowed.mkdir()
    settings = Settings(data_dir=root / "studio", allowed_paths=f"{allowed}:{datasets_dir}")
    with pytest.MonkeyPatch.context() as patch, registered(SPEECH, AUDIO_CHAT):
        patch.setattr(check_worker, "_checker", InProcessChecker())
        app = build_app(settings)
        with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            yield RawGradio(client), app.state.runner, allowed, toy_model(allowed / "speech-model", SPEECH)


def test_the_preview_plays_each_clip_and_start_refuses_a_missing_one(page, datasets_dir: Path) -> None:
    raw, runner, allowed, speech = page
    preview = raw.fn_index(inputs_like="start", outputs=PREVIEW_OUTPUTS)
    demo = str(datasets_dir / "mllm_audio_demo.json")
    shown = raw.call(preview, [None, demo, "auto", "", str(speech), 512, "sft", "", 30], pad=True)
    assert shown["success"], shown
    summary, table = shown["output"]["data"][:2]
    assert "Audio: 3 clips in the first 3 rows, 12.8 s in all" in summary
    assert "found from the data (yes)" in summary
    assert table["value"]["headers"] == ["row", "conversation", "audio"]
    cells = [row[-1] for row in table["value"]["data"]]
    assert [cell.count('<audio controls preload="none" src="data:audio/mpeg;base64,') for cell in cells] == [1, 1, 1]
    assert [cell.rsplit("(", 1)[1] for cell in cells] == ["4.0 s)", "2.9 s)", "5.9 s)"]
    refused = raw.call(preview, [None, demo, "auto", "", str(speech), 512, "sft", "", 5], pad=True)
    assert "row 3 (3.flac, 5.9 s)" in json.dumps(refused)
    data = bad_clip_data(allowed, "missing.wav")
    started = raw.call(raw.fn_index("start"), form_args(str(data), model_name=str(speech), max_steps=1), pad=True)
    assert "bad.json, row 2: audio clip missing.wav was not found" in json.dumps(started), json.dumps(started)[:800]
    assert not runner.status().is_training_running and runner.status().phase.value == "idle"


def _event(raw: RawGradio, *elem_ids: str) -> int:
    """The id of the event whose inputs are exactly the components with ``elem_ids``."""
    ids = {c["props"].get("elem_id"): c["id"] for c in raw.config["components"] if c.get("props", {}).get("elem_id")}
    wanted = [ids[name] for name in elem_ids]
    return next(d["id"] for d in raw.dependencies if d["inputs"] == wanted)


def test_the_chat_takes_no_clip_the_server_never_received(page, datasets_dir: Path, tmp_path: Path) -> None:
    raw, _, allowed, _ = page
    uploaded = raw.client.post("/gradio_api/upload", files={"files": ("2.wav", (CLIPS / "2.wav").read_bytes())})
    elsewhere = shutil.copy(CLIPS / "2.wav", tmp_path / "2.wav")  # real audio: read, it would be taken
    held, taken = _event(raw, "chat-audio"), _event(raw, "chat-image", "chat-audio")
    for path in (str(elsewhere), str(CLIPS / "2.wav"), str(allowed / ".." / "2.wav")):
        for event, data in ((held, [file_value(path)]), (taken, [None, file_value(path)])):
            said = json.dumps(raw.call(event, data))  # Gradio's own path check, else ``chat_audio``'s
            assert "not uploaded" in said and "data:audio" not in said, said[:500]
    shown = raw.call(held, [file_value(uploaded.json()[0])])  # a clip this server received is taken
    assert shown["success"] and shown["output"]["data"][-1] == "", shown  # no notice beside Send
