"""The check's audio line and the audio refusals Check and Start share (``preflight.audio``): every
clip of the data through the one audio opener, refused by file and row at Check
(``run_preflight``) and Start (``start_issues``) alike; ``is_dataset_audio`` against the data and
the model; no audio line for a model that reads no audio. Toy audio kinds stand for the real ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.audio_kinds import AUDIO_CHAT, SPEECH, audio_row, registered, toy_model, write_clip
from trainer_core.preflight.audio import audio_check, model_sampling_rate
from trainer_core.preflight.check import run_preflight, start_issues
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings


@pytest.fixture
def place(tmp_path: Path, datasets_dir: Path) -> tuple[Settings, Path, Path]:
    """(settings allowing tmp_path and the shared datasets, a toy speech model, a text model folder)."""
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=f"{tmp_path}:{datasets_dir}")
    text = tmp_path / "text-model"
    text.mkdir()
    (text / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    return settings, toy_model(tmp_path / "speech-model", SPEECH), text


def test_the_demo_gets_its_audio_line(place, datasets_dir: Path) -> None:
    settings, speech, _ = place
    request = TrainingStartRequest(model_name=str(speech), local_datasets=[str(datasets_dir / "mllm_audio_demo.json")])
    with registered(SPEECH, AUDIO_CHAT):
        line, errors = audio_check(request, settings, speech)  # run_preflight's report.audio: tests/api
        resampled = audio_check(request.model_copy(update={"sampling_rate": 24_000}), settings, speech)[0]
    assert errors == [] and line == (
        "audio: 3 clips in 3 rows, 12.8 s in all, longest 5.9 s (row 3, 3.flac); files at 16000 / 48000 Hz, "
        "read at 16000 Hz (the model's feature extractor), 1 stereo clip(s) mixed down to mono; none over "
        "max_audio_seconds (30 s); is_dataset_audio: found from the data (yes)"
    )
    assert "read at 24000 Hz (sampling_rate)" in resampled and model_sampling_rate(speech) == 16_000


@pytest.mark.parametrize(
    ("clip", "expected"),
    [
        ("missing.wav", "bad.json, row 2: audio clip missing.wav was not found"),
        ("garbage.wav", "bad.json, row 2: audio clip garbage.wav cannot be read as audio"),
        ("long.wav", "bad.json: 1 clip(s) longer than max_audio_seconds (2 s): row 2 (long.wav, 3.0 s)."),
        ("/etc/hostname", "bad.json, row 2: audio clip: /etc/hostname is outside the allowed folders"),
    ],
)
def test_check_and_start_refuse_a_clip_by_file_and_row(place, tmp_path: Path, clip: str, expected: str) -> None:
    settings, speech, _ = place
    write_clip(tmp_path / "ok.wav", 0.5)
    write_clip(tmp_path / "long.wav", 3.0)
    (tmp_path / "garbage.wav").write_bytes(b"not audio at all" * 8)
    data = tmp_path / "bad.json"
    data.write_text(json.dumps([audio_row("ok.wav"), audio_row(clip)]), encoding="utf-8")
    request = TrainingStartRequest(model_name=str(speech), local_datasets=[str(data)], max_audio_seconds=2)
    with registered(SPEECH):
        report = run_preflight(request, settings, estimates=False)
        started = start_issues(request, settings)
    assert [issue.code for issue in report.errors] == ["data_error"] and report.audio is None
    assert report.errors[0].message.startswith(expected), report.errors[0].message
    assert [issue.message for issue in started] == [report.errors[0].message]


def test_is_dataset_audio_is_refused_where_it_cannot_hold(place, tmp_path: Path, datasets_dir: Path) -> None:
    settings, speech, text = place
    demo = str(datasets_dir / "mllm_audio_demo.json")
    text_data = datasets_dir / "identity.json"
    on_for_text = TrainingStartRequest(model_name=str(text), local_datasets=[str(text_data)], is_dataset_audio=True)
    with registered(SPEECH, AUDIO_CHAT):
        (refused,) = audio_check(on_for_text, settings, text)[1]
        (no_clips,) = start_issues(on_for_text.model_copy(update={"model_name": str(speech)}), settings)
        (off,) = start_issues(
            TrainingStartRequest(model_name=str(speech), local_datasets=[demo], is_dataset_audio=False), settings
        )
        text_line = audio_check(TrainingStartRequest(model_name=str(text), local_datasets=[demo]), settings, text)
    assert refused.message.startswith(f"is_dataset_audio: it is on, but {text} reads no audio")
    assert "a speech-to-text model (e.g. toy/whisper-tiny), or an audio chat model" in refused.message
    assert "is_dataset_audio" in refused.fields and "model_name" in refused.fields
    assert no_clips.message.startswith("is_dataset_audio: it is on, but no row of the data holds an audio clip")
    assert off.message.startswith("is_dataset_audio: it is off, but the data holds audio clips")
    assert text_line == (None, [])  # a text model's rows are refused where they are made (data.media)


def test_the_rate_is_read_from_a_transformers_5_processor_config(tmp_path: Path) -> None:
    (tmp_path / "processor_config.json").write_text(
        json.dumps({"processor_class": "WhisperProcessor", "feature_extractor": {"sampling_rate": 16_000}}),
        encoding="utf-8",
    )
    assert model_sampling_rate(tmp_path) == 16_000
    assert model_sampling_rate(tmp_path / "missing") is None
