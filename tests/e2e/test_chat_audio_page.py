"""The audio kinds in a real browser (headless Chromium via Playwright) over the real training worker,
chat engine and inference worker, one app for the module. The Train form: each tiny audio model
(Whisper, CSM, Qwen2-Audio) typed in the model box shows its own audio options (none for a text
model), previews the shared clips with a player and a duration each, is checked (the check's line
names the kind, the clips and the settings typed) and trains 3 steps. The Chat tab: a clip uploaded
to a LoRA run of the tiny Whisper is transcribed, tuned beside base (the texts are the run's own
``generate`` with its adapter on and off), the tiny Qwen2-Audio, a run of whole weights, answers a
clip uploaded with a question, and the tiny CSM, a run of whole weights, says a typed text in voice
1: the chat plays a clip as long as the speech it names."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ServerThread, allowed, screenshot, wait_for
from tests.support.page_tools import dataset, open_studio, set_number, shot, start_and_finish
from tests.support.speech_data import CLIPS, speech_file
from tests.support.speech_runs import add_run, lora_speech_run
from tests.support.tts_data import tts_file
from ui.audio_panel import AUDIO_FIELDS

pytestmark = [pytest.mark.slow]  # the inference worker is started here (``browser`` marks the lane)

STT = "job_20250107_090000_6a6b6c6d"  # a LoRA run of the tiny Whisper (language "en")
HEARS = "job_20250108_090000_7a7b7c7d"  # the tiny Qwen2-Audio's folder as a run's whole weights
SPEAKS = "job_20250109_090000_8a8b8c8d"  # the tiny CSM's folder as a run's whole weights
QUIET = "() => document.querySelector('#chat-notice').innerText.trim() === ''"  # nothing said beside Send
LISTED = "() => (document.querySelector('#chat-model input') || {value: ''}).value !== ''"  # the tab's models listed
SENT = "#chat-audio audio"  # the clip's player: gone once the send has ended (the clip went with the turn)


def _transcripts(folder, base) -> tuple[str, str]:
    """(tuned, base) transcripts of 2.wav by the run in ``folder``: its own generate, adapter on and off."""
    from trainer_core.data.audio import read_audio
    from trainer_core.kinds.speech_to_text.serve import load_speech_model, transcribe
    from trainer_core.serving.schemas import ModelChoice

    choice = ModelChoice(id=STT, label=STT, kind="final", base_model=str(base), path=str(folder), adapter=True)
    model, processor, _ = load_speech_model(choice, folder.parent, "cpu")
    clip = read_audio(str(CLIPS / "2.wav"), sampling_rate=16000)
    return tuple(transcribe(model, processor, clip, "en", "transcribe", on)[0] for on in (True, False))


def _choose(page, model_id: str, box: str = "#chat-audio") -> None:
    chosen = page.locator("#chat-model input")
    chosen.fill(model_id)
    chosen.press("Enter")
    page.locator(box).wait_for(state="visible", timeout=30_000)


def _upload(page, clip: str) -> None:
    page.locator('#chat-audio button[aria-label="Upload file"]').click()  # the box opens on the microphone
    page.locator("#chat-audio input[type=file]").set_input_files(str(CLIPS / clip))
    page.locator("#chat-audio audio").first.wait_for(state="attached", timeout=30_000)  # the player, once uploaded


def _turns(page, chat: str) -> tuple[list[str], list[str]]:
    """(the user's turns, the model's) as ``chat`` shows them."""
    return tuple(page.locator(f"{chat} [data-testid={who}]").all_inner_texts() for who in ("user", "bot"))


def _played_seconds(page) -> tuple[float, str]:
    """(the duration of the tuned chat's player, in seconds as the browser reads it, the answer's words:
    the bubble after the player's)."""
    player = page.locator("#chat-tuned audio").last  # Gradio's minimal player holds an <audio> of the file
    player.wait_for(state="attached", timeout=180_000)
    answer = page.locator("#chat-tuned [data-testid=bot]").last
    seconds = player.evaluate(
        "a => new Promise(done => a.readyState >= 1 ? done(a.duration)"
        " : a.addEventListener('loadedmetadata', () => done(a.duration)))"
    )
    return seconds, answer.inner_text()


@pytest.fixture(scope="module")
def audio_app(tmp_path_factory, datasets_dir, tiny_model_dir, tiny_whisper_dir, tiny_audio_chat_dir, tiny_csm_dir):
    """(settings, the app, its url, a folder for data files) of the one app this module drives (the
    real training worker and chat engine): the tiny text, Whisper, Qwen2-Audio and CSM models'
    folders, the shared datasets and that folder allowed."""
    from server import build_app
    from trainer_core.settings import Settings

    root = tmp_path_factory.mktemp("audio-page")
    (root / "files").mkdir()
    models = (tiny_model_dir, tiny_whisper_dir, tiny_audio_chat_dir, tiny_csm_dir)
    folders = allowed(*(m.parent for m in models), datasets_dir, root / "files")
    settings = Settings(data_dir=root / "data", allowed_paths=folders)
    app = build_app(settings)
    with ServerThread(app) as server:
        yield settings, app, server.url, root / "files"
        app.state.runner.stop(save=False)
        app.state.runner.wait(10)


def test_a_clip_from_the_page_is_transcribed_and_heard(
    audio_app, browser, tmp_path, tiny_whisper_dir, tiny_audio_chat_dir, tiny_csm_dir
):
    settings, app, url, _ = audio_app
    store, engine = app.state.runner.store, app.state.engine
    folder = lora_speech_run(tiny_whisper_dir, settings.runs_dir / STT)
    add_run(store, STT, folder, str(tiny_whisper_dir))
    add_run(store, HEARS, tiny_audio_chat_dir, str(tiny_audio_chat_dir))
    add_run(store, SPEAKS, tiny_csm_dir, str(tiny_csm_dir))
    tuned, base = _transcripts(folder, tiny_whisper_dir)
    assert tuned != base  # the adapter changes what is heard
    page = open_studio(browser, url)
    try:
        page.get_by_role("tab", name="Chat").click()
        page.wait_for_function(LISTED, timeout=30_000)  # a choice typed before would be reset to the base (CSM)
        _choose(page, STT)
        page.locator("#chat-compare input").check()
        _upload(page, "2.wav")
        page.locator("#chat-send").click()  # no text: the clip is the turn
        page.locator(SENT).first.wait_for(state="detached", timeout=180_000)
        page.wait_for_function(QUIET, timeout=15_000)  # no refusal (a timer over it may pass first)
        assert _turns(page, "#chat-tuned") == (["🎤 2.9 s"], [tuned])
        assert _turns(page, "#chat-base") == (["🎤 2.9 s"], [base])
        screenshot(page, tmp_path, "chat-transcribed.png")

        page.locator("#chat-clear").click()
        page.locator("#chat-compare input").uncheck()
        _choose(page, HEARS)
        _upload(page, "1.mp3")
        page.get_by_text("Generation settings").click()
        page.locator("#field-max_new_tokens input").fill("8")  # noise from a random model: a few tokens do
        message = page.locator("#chat-message textarea")
        message.fill("What is this sound?")
        message.press("Enter")
        page.locator(SENT).first.wait_for(state="detached", timeout=180_000)
        page.wait_for_function(QUIET, timeout=15_000)  # no refusal (a timer over it may pass first)
        asked, answered = _turns(page, "#chat-tuned")
        assert asked == ["🎤 4.0 s What is this sound?"] and answered[0].endswith("[max_new_tokens reached]")
        screenshot(page, tmp_path, "chat-heard.png")

        page.locator("#chat-clear").click()
        _choose(page, SPEAKS, "#chat-voice")
        assert not page.locator("#chat-audio").is_visible()  # a text-to-speech model hears no clip
        page.locator("#chat-voice textarea").fill("1")
        message.fill("Hello there.")
        message.press("Enter")
        seconds, words = _played_seconds(page)
        page.wait_for_function(QUIET, timeout=15_000)
        assert _turns(page, "#chat-tuned")[0] == ["Hello there."]
        named = float(words.split("🔊 ")[1].split(" s,")[0])  # "🔊 0.48 s, voice 1"
        assert words.strip().endswith("s, voice 1") and seconds == pytest.approx(named, abs=0.01) and seconds > 0
        screenshot(page, tmp_path, "chat-spoken.png")
    finally:
        page.close()
        engine.unload()


def _voice_file(folder: Path) -> Path:
    """``tts_file``'s rows with their speaker numbers in a column named ``voice`` (the form names it)."""
    data = tts_file(folder)
    rows = json.loads(data.read_text())
    voiced = folder / "voice.json"
    voiced.write_text(json.dumps([{**row, "voice": row.pop("speaker")} for row in rows]))
    return voiced


@dataclass(frozen=True)
class AudioRun:
    """One tiny audio model's run from the Train form: the audio options the form shows for it,
    the values typed (field -> value), the preview's players (clip, duration), words of the check's
    report, and fields of the run's request.json."""

    options: frozenset[str]
    values: dict[str, str]
    clips: list[tuple[str, str]]
    checked: tuple[str, ...]
    request: dict[str, Any]


RUNS = {
    "whisper": AudioRun(
        frozenset({"sampling_rate", "max_audio_seconds", "language", "task", "return_timestamps"}),
        {"max_seq_length": "64", "language": "en", "task": "transcribe"},
        [("1.mp3", "4.0 s"), ("2.wav", "2.9 s"), ("3.flac", "5.9 s"), ("4.mp3", "5.0 s")],
        (
            "Speech-to-text (Whisper): 4 clips, 17.8 s of audio",
            "decoder prompt <|startoftranscript|><|en|><|transcribe|><|notimestamps|>",
        ),
        {"language": "en", "task": "transcribe", "max_seq_length": 64},
    ),
    "csm": AudioRun(  # Whisper's language, typed before, is hidden for CSM: it does not reach the run
        frozenset({"sampling_rate", "max_audio_seconds", "speaker_column"}),
        {"max_seq_length": "512", "speaker_column": "voice"},
        [("2.wav", "2.9 s"), ("3.flac", "5.9 s")],
        ("Text-to-speech (CSM): 2 clips, 8.8 s of audio, longest 5.9 s (limit 30 s), 2 speakers",),
        {"speaker_column": "voice", "language": None, "task": None},
    ),
    "qwen2-audio": AudioRun(
        frozenset({"sampling_rate", "max_audio_seconds"}),
        {"max_seq_length": "512"},
        [("1.mp3", "4.0 s"), ("2.wav", "2.9 s"), ("3.flac", "5.9 s")],
        ("Audio chat: Qwen2-Audio;", "in the first 3 rows: 3 clips, 12.8 s in all (2.9 to 5.9 s)"),
        {"speaker_column": None, "max_seq_length": 512},
    ),
}


def _choose_model(page, folder: Path, options: frozenset[str]) -> None:
    """Type ``folder`` in the form's model box; wait until *Audio options* shows exactly ``options``
    (none: the section hidden), the section open."""
    box = page.locator("#field-model_name input")
    box.fill(str(folder))
    box.press("Enter")
    section = page.locator("#section-audio")
    section.wait_for(state="visible" if options else "hidden", timeout=30_000)
    if options and not page.locator("#field-max_audio_seconds").is_visible():
        section.locator("button.label-wrap").click()
    shown = lambda: {name for name in AUDIO_FIELDS if page.locator(f"#field-{name}").is_visible()}  # noqa: E731
    wait_for(lambda: shown() == options, 30, f"the audio options {sorted(options)}")


def _type(page, values: dict[str, str]) -> None:
    """Fill form fields (number and text boxes, dropdowns), pressing Enter in each."""
    for name, value in values.items():
        if name in ("max_steps", "batch_size"):  # in the closed Hyperparameters section
            set_number(page, name, value)
            continue
        box = page.locator(f"#field-{name}").locator("input, textarea").first
        box.fill(value)
        box.press("Enter")


def _players(page) -> list[tuple[str, str]]:
    """(clip, duration) of each player the dataset preview shows, in row order; each player's
    ``src`` is an MP3 ``data:`` URL."""
    players = page.locator("#preview-table audio >> visible=true")
    players.first.wait_for(timeout=30_000)
    sources = players.evaluate_all("players => players.map(p => p.src)")
    assert all(src.startswith("data:audio/mpeg;base64,") for src in sources), [src[:40] for src in sources]
    found = re.findall(r"(\S+) \((\d+\.\d s)\)", page.locator("#preview-table").inner_text())
    assert len(found) == len(sources), found
    return found


def _checked(page, words: str) -> str:
    """Press Check; the pre-flight report's text once it holds ``words``."""
    page.locator("#check").click()
    page.locator("#preflight-report").get_by_text(words).first.wait_for(timeout=120_000)
    return page.locator("#preflight-report").inner_text()


@pytest.mark.timeout(600)
def test_each_audio_kind_trains_3_steps_from_the_page(
    audio_app, browser, tmp_path, datasets_dir, tiny_model_dir, tiny_whisper_dir, tiny_audio_chat_dir, tiny_csm_dir
):
    """For each tiny audio model: its audio options shown (hidden again for a text model), the
    shared clips previewed with players and durations, Check's line naming the kind and the clips
    (and the settings typed), Start trains 3 steps with finite losses and the typed settings."""
    _, app, url, files = audio_app
    runner = app.state.runner
    models = {
        "whisper": (tiny_whisper_dir, speech_file(files / "speech")),
        "csm": (tiny_csm_dir, _voice_file(files / "tts")),
        "qwen2-audio": (tiny_audio_chat_dir, datasets_dir / "mllm_audio_demo.json"),
    }
    page = open_studio(browser, url)
    try:
        _type(page, {"max_steps": "3", "batch_size": "2"})
        for name, (model, data) in models.items():
            run = RUNS[name]
            _choose_model(page, model, run.options)
            dataset(page, data)
            assert _players(page) == run.clips, name
            _type(page, run.values)
            report = _checked(page, run.checked[0])
            assert report.startswith("Pre-flight check: ready") and all(w in report for w in run.checked), report
            shot(page, tmp_path, f"audio-{name}.png")
            start_and_finish(page, runner, steps=3)  # the status line: "completed · step 3 / 3"
            out = Path(runner.status().details["output_dir"])
            metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
            assert [m["step"] for m in metrics] == [1, 2, 3] and all(math.isfinite(m["loss"]) for m in metrics), name
            request = json.loads((out / "request.json").read_text())
            assert {field: request[field] for field in run.request} == run.request, name
        _choose_model(page, tiny_model_dir, frozenset())  # a text model: no audio options
    finally:
        page.close()
