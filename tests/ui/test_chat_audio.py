"""The Chat tab's audio clips, handler by handler: the box shows for the runs of audio models only
(their kind read from config.json), a clip becomes a mono WAV data: URL at its own rate, refusals
are said beside Send (a path the server never received, a file that is no audio, a clip over the
limit), an audio-in chat turn hands the clip and the text to the engine (and the earlier turns'
clips again), and a speech-to-text model's Send transcribes the clip, tuned beside base."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.support.fake_engine import FakeEngine
from tests.support.speech_data import CLIPS
from tests.support.speech_runs import add_run
from trainer_core.data.audio import audio_info, read_audio
from trainer_core.settings import Settings
from ui import chat_audio, chat_handlers, chat_send

DEFAULTS = (None,) * len(chat_handlers.SETTINGS_FIELDS)  # the generation settings widgets, untouched
CONFIGS = {  # just enough config.json for each kind's detection
    "whisper-tiny": {"model_type": "whisper"},
    "qwen2-audio-tiny": {"model_type": "qwen2_audio", "audio_config": {"model_type": "qwen2_audio_encoder"}},
    "llama-tiny": {"model_type": "llama"},
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "studio", allowed_paths=str(tmp_path / "models"))


def _upload(settings: Settings, source: Path, name: str = "") -> str:
    """``source`` copied into the uploads folder, as the server keeps a received file."""
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    return str(shutil.copy(source, settings.uploads_dir / (name or source.name)))


def _send(engine: FakeEngine, model: str, message: str, clip=None, history=(), images=(), clips=(), compare=False):
    """The last outputs of the tab's Send: (textbox, chat, base chat, state, notice, images, clips)."""
    sent = chat_send.send(
        engine, model, compare, "", message, list(history), [], *DEFAULTS, None, list(images), clip, list(clips)
    )
    return list(sent)[-1]


def test_the_box_shows_for_the_runs_of_audio_models_only(settings: Settings, tmp_path: Path) -> None:
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine

    store = RunStore(settings.db_path)
    for day, (name, config) in enumerate(CONFIGS.items(), start=1):
        base = tmp_path / "models" / name
        base.mkdir(parents=True)
        (base / "config.json").write_text(json.dumps(config))
        run = settings.runs_dir / f"job_2025010{day}_090000_{name[:4]}"
        run.mkdir(parents=True)
        (run / "adapter_model.safetensors").write_bytes(b"w")  # a LoRA run on that base (never loaded here)
        (run / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
        add_run(store, run.name, run, str(base))
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    engine = ChatEngine(runner, settings)  # no model is loaded: the box asks the runs' configs alone
    shown = {
        job: chat_audio.audio_box(engine, job)["visible"] for job in sorted(p.name for p in settings.runs_dir.iterdir())
    }
    assert list(shown.values()) == [True, True, False]  # Whisper, Qwen2-Audio, a text model
    assert [engine.reads_images(job) for job in shown] == [False, False, False]
    assert chat_audio.audio_box(engine, "base")["visible"] is False  # the newest run's base: the text model
    assert [chat_audio.audio_box(engine, m)["visible"] for m in ("job_nope", "", None)] == [False, False, False]


def test_a_clip_becomes_a_mono_wav_data_url_at_its_own_rate(settings: Settings) -> None:
    path = _upload(settings, CLIPS / "1.mp3")
    original = audio_info(path)
    url, notice = chat_audio.pending(settings, path)
    assert notice == "" and url.startswith("data:audio/wav;base64,")
    held = audio_info(url)
    assert (held.channels, held.sampling_rate) == (
        1,
        original.sampling_rate,
    ) and original.channels == 2  # 48 kHz stereo
    assert held.seconds == pytest.approx(original.seconds)
    heard = read_audio(url, original.sampling_rate)
    decoded = np.clip(read_audio(path, original.sampling_rate), -1, 1)  # the mp3 decoder overshoots full scale
    assert np.abs(heard - decoded).max() < 1e-4  # 16-bit: the same samples
    assert chat_audio.clip_words(url) == "🎤 4.0 s"
    assert chat_audio.pending(settings, None) == (None, "")


def test_refusals_are_said_beside_send_and_nothing_is_held(settings: Settings, tmp_path: Path) -> None:
    import soundfile

    outside = str(shutil.copy(CLIPS / "2.wav", tmp_path / "2.wav"))  # a real clip the server never received
    (tmp_path / "notes.wav").write_text("not audio at all")
    soundfile.write(tmp_path / "long.wav", np.zeros(8000 * 31, dtype=np.float32), 8000)
    cases = {
        outside: "Audio clip: this file was not uploaded to this server; upload it again",
        str(CLIPS / "2.wav"): "was not uploaded to this server",  # an allowed data folder is not an upload
        _upload(settings, tmp_path / "notes.wav"): "Audio clip: audio clip notes.wav cannot be read as audio",
        _upload(settings, tmp_path / "long.wav"): "Audio clip: 31.0 s is longer than the 30 s a chat clip may be",
    }
    for clip, said in cases.items():
        held, notice = chat_audio.pending(settings, str(clip))
        assert held is None and said in notice and "Not taken" in notice, notice
        assert chat_audio.taken(settings, str(clip)) is None


def test_an_audio_chat_turn_hands_the_clip_and_its_text_to_the_engine(settings: Settings) -> None:
    engine = FakeEngine()
    engine.add("job_audio")
    clip = chat_audio.data_url(_upload(settings, CLIPS / "2.wav"), settings)
    text, history, base, _, notice, images, clips = _send(engine, "job_audio", "What is it?", clip)
    assert (text, notice, base, images, clips) == ("", "", [], [None], [clip])
    assert history == [
        {"role": "user", "content": "🎤 2.9 s What is it?"},
        {"role": "assistant", "content": "echo: What is it?"},
    ]
    asked = engine.calls[-1][1][-1]
    assert (asked.content, asked.audios, asked.images) == ("What is it?", [clip], [])
    # the next turn gives the model the earlier clip again (kept on the server), its text unmarked
    _, history, *_, clips = _send(engine, "job_audio", "And now?", None, history, images, clips)
    sent = engine.calls[-1][1]
    assert [(m.role, m.content, m.audios) for m in sent] == [
        ("user", "What is it?", [clip]),
        ("assistant", "echo: What is it?", []),
        ("user", "And now?", []),
    ]
    assert clips == [clip, None] and history[-2] == {"role": "user", "content": "And now?"}
    _, history, *_ = _send(engine, "job_audio", "", clip, history, [None, None], clips)  # a clip alone is a turn
    assert history[-2] == {"role": "user", "content": "🎤 2.9 s"} and engine.calls[-1][1][-1].audios == [clip]
    kept, same, *_, notice, _, _ = _send(engine, "job_audio", "  ", None, history)
    assert kept == "  " and same == history and "Message: type something to send." in notice


def test_a_speech_to_text_send_transcribes_the_clip_tuned_beside_base(settings: Settings) -> None:
    engine = FakeEngine()
    engine.add("job_whisper", serves="transcriptions")
    clip = chat_audio.data_url(_upload(settings, CLIPS / "3.flac"), settings)
    text, history, base, _, notice, images, clips = _send(engine, "job_whisper", "", clip, compare=True)
    heard = {"role": "assistant", "content": f"heard {len(clip)}"}
    assert (text, notice, images, clips) == ("", "", [None], [clip])
    assert history == base == [{"role": "user", "content": "🎤 5.9 s"}, heard]
    assert engine.transcriptions == [("job_whisper", clip, True), ("job_whisper", clip, False)]
    assert engine.calls == []  # nothing was asked to chat
    refusals = {
        ("job_whisper", None, False): "Audio clip: record or upload a clip for this speech-to-text model",
        ("base", clip, True): "Base vs tuned: choose a run or checkpoint",
    }
    engine.add("base", serves="transcriptions")
    for (model, held, compare), said in refusals.items():
        kept, same, _, _, notice, *_ = _send(engine, model, "a note", held, history, images, clips, compare)
        assert kept == "a note" and same == history and said in notice, notice
    engine.busy = True
    *_, notice, _, _ = _send(engine, "job_whisper", "", clip, history, images, clips)
    assert "training job is running" in notice and len(engine.transcriptions) == 2
