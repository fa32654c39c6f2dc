"""Audio data through the page's own doors, spoken as raw Gradio queue calls (the page, or an
attacker, would send the same): the dataset preview shows a player and a duration for each clip of
the shared demo, and Start refuses a missing clip by file and row (no run starts). Toy audio kinds
stand for the real ones; the check worker answers in this process so that it sees them."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ServerThread, form_args
from tests.support.audio_kinds import AUDIO_CHAT, SPEECH, InProcessChecker, bad_clip_data, registered, toy_model
from tests.support.raw_gradio import PREVIEW_OUTPUTS, RawGradio


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
