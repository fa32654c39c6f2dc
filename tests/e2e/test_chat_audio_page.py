"""The Chat tab's audio box in a real browser (headless Chromium via Playwright) over the real chat
engine and inference worker: a clip uploaded to a LoRA run of the tiny Whisper is transcribed, tuned
beside base (the texts are the run's own ``generate`` with its adapter on and off), the tiny
Qwen2-Audio, a run of whole weights, answers a clip uploaded with a question, and the tiny CSM, a run
of whole weights, says a typed text in voice 1: the chat plays a clip as long as the speech it names."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ServerThread, allowed, screenshot
from tests.support.page_tools import open_studio
from tests.support.speech_data import CLIPS
from tests.support.speech_runs import add_run, lora_speech_run

pytestmark = [pytest.mark.slow]  # the inference worker is started here (``browser`` marks the lane)

STT = "job_20250107_090000_6a6b6c6d"  # a LoRA run of the tiny Whisper (language "en")
HEARS = "job_20250108_090000_7a7b7c7d"  # the tiny Qwen2-Audio's folder as a run's whole weights
SPEAKS = "job_20250109_090000_8a8b8c8d"  # the tiny CSM's folder as a run's whole weights
QUIET = "() => document.querySelector('#chat-notice').innerText.trim() === ''"  # nothing said beside Send
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


def test_a_clip_from_the_page_is_transcribed_and_heard(
    browser, tmp_path, tiny_whisper_dir, tiny_audio_chat_dir, tiny_csm_dir
):
    from server import build_app
    from trainer_core.settings import Settings

    models = (tiny_whisper_dir.parent, tiny_audio_chat_dir.parent, tiny_csm_dir.parent)
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=allowed(*models))
    app = build_app(settings)
    store, engine = app.state.runner.store, app.state.engine
    folder = lora_speech_run(tiny_whisper_dir, settings.runs_dir / STT)
    add_run(store, STT, folder, str(tiny_whisper_dir))
    add_run(store, HEARS, tiny_audio_chat_dir, str(tiny_audio_chat_dir))
    add_run(store, SPEAKS, tiny_csm_dir, str(tiny_csm_dir))
    tuned, base = _transcripts(folder, tiny_whisper_dir)
    assert tuned != base  # the adapter changes what is heard
    with ServerThread(app) as server:
        page = open_studio(browser, server.url)
        try:
            page.get_by_role("tab", name="Chat").click()
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
            page.locator("#chat-voice input").fill("1")
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
