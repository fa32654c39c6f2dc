"""The Chat tab's Send for a text-to-speech model, handler by handler: the voice box shows (and the
clip box hides) for the runs of CSM models only, Send speaks the typed text in the chosen voice, the
chat shows the turn and a player of the speech (a wav under the system temp folder), tuned beside
base; refusals are said beside Send keeping the text (empty text, a bad voice, whole weights with
Base vs tuned, a text too long for the model, training running); and, in process with the tiny CSM's
own worker code, the played wav holds exactly the engine's samples at its rate."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.support.fake_engine import SPEECH_RATE, FakeEngine
from tests.support.speech_runs import add_run
from trainer_core.serving.schemas import Speech
from trainer_core.settings import Settings
from ui import chat_handlers, chat_send, chat_speech, chat_tools

DEFAULTS = (None,) * len(chat_handlers.SETTINGS_FIELDS)  # the generation settings widgets, untouched
TTS = "job_tts"


def _send(engine, model: str, message: str, voice=0, history=(), compare=False):
    """The last outputs of the tab's Send: (textbox, chat, base chat, state, notice, images, clips)."""
    sent = chat_send.send(engine, model, compare, "", message, list(history), [], *DEFAULTS, None, [], None, [], voice)
    return list(sent)[-1]


def _played(message: dict) -> Path:
    """The wav file an assistant message plays (its file part)."""
    return Path(message["content"][0]["path"])


def test_the_voice_box_shows_and_the_clip_box_hides_for_speech_models(tmp_path: Path) -> None:
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine

    settings = Settings(data_dir=tmp_path / "studio", allowed_paths=str(tmp_path / "models"))
    store = RunStore(settings.db_path)
    for day, name in enumerate(("whisper", "llama", "csm"), start=1):
        base = tmp_path / "models" / name
        base.mkdir(parents=True)
        (base / "config.json").write_text(json.dumps({"model_type": name}))
        run = settings.runs_dir / f"job_2025010{day}_090000_{name}"
        run.mkdir(parents=True)
        (run / "adapter_model.safetensors").write_bytes(b"w")  # a LoRA run on that base (never loaded here)
        (run / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
        add_run(store, run.name, run, str(base))
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    engine = ChatEngine(runner, settings)  # no model is loaded: the boxes ask the runs' configs alone
    shown = {
        name: tuple(box["visible"] for box in chat_speech.boxes(engine, f"job_2025010{day}_090000_{name}"))
        for day, name in enumerate(("whisper", "llama", "csm"), start=1)
    }
    assert shown == {"whisper": (True, False), "llama": (False, False), "csm": (False, True)}
    assert tuple(box["visible"] for box in chat_speech.boxes(engine, "base")) == (False, True)  # the newest run's
    assert [chat_speech.boxes(engine, m)[1]["visible"] for m in ("job_nope", "", None)] == [False, False, False]


def test_send_speaks_the_text_tuned_beside_base_as_players() -> None:
    engine = FakeEngine()
    engine.add(TTS, serves="speech")
    text, history, base, _, notice, images, clips = _send(engine, TTS, "Hello there friend", voice=2, compare=True)
    assert (text, notice, images, clips) == ("", "", [None], [None])
    assert engine.speeches == [(TTS, "Hello there friend", 2, True), (TTS, "Hello there friend", 2, False)]
    assert engine.calls == [] and engine.transcriptions == []  # nothing was asked to chat or transcribe
    seconds = 3 * (SPEECH_RATE // 10) / SPEECH_RATE
    for chat, loudness in ((history, 0.5), (base, 0.25)):
        asked, said = chat
        assert asked == {"role": "user", "content": "Hello there friend"}
        assert said["role"] == "assistant" and said["content"][1] == {"type": "text", "text": "🔊 0.30 s, voice 2"}
        wav = _played(said)
        assert wav.parent == Path(tempfile.gettempdir()) / chat_speech.SPEECH_DIR and wav.suffix == ".wav"
        samples, rate = soundfile.read(wav, dtype="float32")
        assert rate == SPEECH_RATE and len(samples) / rate == pytest.approx(seconds)
        assert np.abs(samples).max() == pytest.approx(loudness, abs=1e-3)  # tuned and base: their own speech
    assert _played(history[1]) != _played(base[1])
    again = _send(engine, TTS, "Hello there friend", voice=2)[1]
    assert _played(again[1]) == _played(history[1])  # the same speech: the same file, no second one
    assert chat_tools.content_text(history[1]["content"]) == "🔊 0.30 s, voice 2"  # a later chat turn reads the line


def test_refusals_are_said_beside_send_keeping_the_text() -> None:
    engine = FakeEngine()
    engine.add(TTS, serves="speech")
    whole = engine.add("job_full", serves="speech").model_copy(update={"adapter": False})
    engine.models["job_full"] = whole  # a full fine-tune: no adapter to switch off
    engine.add("base", serves="speech")
    earlier = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "🔊 0.10 s, voice 0"}]
    cases = {
        (TTS, "   ", 0, False): "Message: type something to send.",
        (TTS, "Say it", " ", False): "Voice: no speaker is given",
        (TTS, "Say it", "-1", False): "Voice: -1 is not a speaker number",
        (TTS, "Say it", 1.5, False): "Voice: 1.5 is not a speaker",
        (TTS, "Say it", "x" * 201, False): "is not a speaker",
        ("base", "Say it", 0, True): "Base vs tuned: choose a run or checkpoint",
        ("job_full", "Say it", 0, True): "Base vs tuned: this model is whole weights",
        (TTS, "word " * 50, 0, False): "input: the text takes 250 tokens, more than this model reads",
    }
    for (model, text, voice, compare), said in cases.items():
        kept, chat, base, _, notice, images, clips = _send(engine, model, text, voice, earlier, compare)
        assert (kept, chat, base, images, clips) == (text, earlier, [], [], []), said
        assert said in notice and "Not sent" in notice, notice
    assert engine.speeches == []
    engine.busy = True
    kept, chat, *_, notice, _, _ = _send(engine, TTS, "Say it", 0, earlier)
    assert (kept, chat) == ("Say it", earlier) and "training job is running" in notice
    engine.busy = False
    assert _send(engine, "job_full", "Say it")[4] == ""  # whole weights speak alone
    assert _send(engine, TTS, "Say it", " tara ")[4] == "" and engine.speeches[-1][2] == "tara"  # a named speaker
    assert _send(engine, TTS, "Say it", "3")[1][-1]["content"][1]["text"].endswith("voice 3")
    assert engine.speeches[-1][2] == 3  # the box's text "3": CSM's numbered voice 3


def test_no_samples_is_said_in_words() -> None:
    silent = Speech(samples=np.zeros(0, dtype=np.float32), sampling_rate=SPEECH_RATE, seconds=0.0, frames=0)
    assert chat_speech.answer(silent, 0) == {"role": "assistant", "content": chat_speech.NOTHING_SAID}


def test_the_played_wav_is_the_tiny_csms_speech(tiny_csm_dir: Path) -> None:
    """In process: the engine's ``speak`` is the worker's own (``TEXT_TO_SPEECH.load_server``)."""
    from trainer_core.kinds.text_to_speech.kind import TEXT_TO_SPEECH
    from trainer_core.serving.errors import ChatInputError

    class WorkerSpeech(FakeEngine):
        def speak(self, model_id: str, text: str, voice: int = 0, use_adapter: bool = True) -> Speech:
            said = server.answer({"input": text, "voice": voice, "use_adapter": use_adapter})
            self.spoken.append(said)
            return Speech(**said)

    engine = WorkerSpeech()
    engine.spoken = []
    choice = engine.add("base", serves="speech").model_copy(update={"base_model": str(tiny_csm_dir), "path": None})
    engine.models["base"] = choice
    server = TEXT_TO_SPEECH.load_server(choice, tiny_csm_dir.parent)
    _, history, *_, notice, _, _ = _send(engine, "base", "Hello there.", voice=1)
    said = engine.spoken[-1]
    info = soundfile.info(_played(history[1]))
    assert notice == "" and len(said["samples"]) > 0
    assert (info.frames, info.samplerate, info.channels) == (len(said["samples"]), said["sampling_rate"], 1)
    assert info.duration == pytest.approx(len(said["samples"]) / said["sampling_rate"]) == said["seconds"]
    played, _ = soundfile.read(_played(history[1]), dtype="float32")
    assert np.abs(played - np.clip(said["samples"], -1, 1)).max() < 1e-4  # 16-bit: the same samples (a random
    # model's codec overshoots full scale; the wav clips it, as /v1/audio/speech does)
    with pytest.raises(ChatInputError) as refused:  # the model's own limit: 1024 positions
        server.answer({"input": "word " * 600, "voice": 0})
    assert refused.value.fields == ("input",) and "more than the 1024 positions this model reads" in str(refused.value)


def test_the_model_list_refresh_keeps_a_listed_choice_untouched() -> None:
    from ui import chat_handlers

    engine = FakeEngine()
    engine.add(TTS, serves="speech")
    kept = chat_handlers.model_dropdown(engine, TTS)
    assert "value" not in kept and TTS in [value for _, value in kept["choices"]]  # the page keeps what it shows
    gone = chat_handlers.model_dropdown(engine, "job_gone")
    assert gone["value"] == TTS  # a choice no longer listed: the newest run
