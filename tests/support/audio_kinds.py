"""Toy audio model kinds for the tests of the audio doors (detection, refusals, preview, check line,
form panel) while the real audio kinds are elsewhere: each reads audio (``media = ("audio",)``),
claims model folders by ``model_type`` and keeps rows' clips out of their text (the doors under
test read the clips themselves, through ``data.audio_rows``). Also the clips and folders those
tests read: sine-wave clips written with soundfile, a damaged clip, a toy model folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import numpy as np

from trainer_core import model_kind
from trainer_core.model_kind import ModelKind

RATE = 16_000  # Hz of the toy clips


class ToyAudioKind(ModelKind):
    """An audio kind claiming configs whose ``model_type`` is ``model_type``."""

    media = ("audio",)

    def __init__(self, name: str, suggestion: str, model_type: str, form_fields: tuple[str, ...] = ()) -> None:
        self.name, self.label, self.suggestion = name, name.replace("_", " "), suggestion
        self.model_type, self.form_fields = model_type, form_fields

    def family(self, config: Any) -> Optional[str]:
        found = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)
        return "Toy" if found == self.model_type else None

    def holds_media(self, dataset: Any) -> bool:
        from trainer_core.data.audio_rows import has_audio

        return has_audio(dataset)

    def keeps_media(self, request: Any, dataset: Any, kind: ModelKind) -> bool:
        return kind is self and self.holds_media(dataset)

    def media_rows(
        self, dataset: Any, fmt: Any, source: str, base: Optional[Path], first_row: int = 1
    ) -> tuple[Any, list[str]]:
        from trainer_core.data.audio_rows import clip_columns
        from trainer_core.data.formats import normalize_with_notes

        return normalize_with_notes(dataset.remove_columns(clip_columns(dataset)), fmt, source, first_row)

    def check_report(self, request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
        from trainer_core.preflight.check import refused_report

        return refused_report(request, [], started)  # no errors of its own: the audio doors' are under test


SPEECH = ToyAudioKind(
    "toy_speech_to_text",
    "a speech-to-text model (e.g. toy/whisper-tiny)",
    "toy_whisper",
    ("language", "task", "return_timestamps"),
)
AUDIO_CHAT = ToyAudioKind("toy_audio_chat", "an audio chat model (e.g. toy/qwen2-audio)", "toy_qwen2_audio")


@contextmanager
def registered(*kinds: ModelKind) -> Iterator[None]:
    """``kinds`` registered for the block (the first asked first), taken out after it."""
    for kind in reversed(kinds):
        model_kind.register(kind)
    try:
        yield
    finally:
        for kind in kinds:
            model_kind.unregister(kind)


def toy_model(folder: Path, kind: ToyAudioKind, sampling_rate: int = RATE) -> Path:
    """A model folder of ``kind`` (config.json, a feature extractor's preprocessor_config.json; no
    weights) at ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": kind.model_type}), encoding="utf-8")
    (folder / "preprocessor_config.json").write_text(json.dumps({"sampling_rate": sampling_rate}), encoding="utf-8")
    return folder.resolve()


def write_clip(path: Path, seconds: float, rate: int = RATE, channels: int = 1) -> Path:
    """A 440 Hz sine clip of ``seconds`` at ``rate`` Hz (format from the suffix) at ``path``."""
    import soundfile

    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    wave = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    soundfile.write(path, np.stack([wave] * channels, axis=1) if channels > 1 else wave, rate)
    return path


def audio_row(clip: str, question: str = "What do you hear?", answer: str = "A tone.") -> dict:
    """A LLaMA-Factory row with one ``<audio>`` marker and its clip."""
    return {
        "messages": [{"role": "user", "content": f"<audio>{question}"}, {"role": "assistant", "content": answer}],
        "audios": [clip],
    }


class InProcessChecker:
    """The app's check worker (``admission.check_worker``) answered in this process, so that the toy
    kinds registered here are the kinds the check sees (a worker process would import only the
    built-in kinds). Set as ``check_worker._checker`` with monkeypatch."""

    pid = None

    def report(self, request: Any, settings: Any, store: Any = None, estimates: bool = True) -> Any:
        from trainer_core.preflight.check import run_preflight

        return run_preflight(request, settings, store, estimates)

    def start_issues(self, request: Any, settings: Any) -> list:
        from trainer_core.preflight.check import start_issues

        return start_issues(request, settings)

    def close(self) -> None:
        return None


def bad_clip_data(folder: Path, clip: str) -> Path:
    """``folder``/bad.json: row 1 with a good clip (ok.wav, 0.5 s), row 2 naming ``clip``; a damaged
    garbage.wav beside it."""
    write_clip(folder / "ok.wav", 0.5)
    (folder / "garbage.wav").write_bytes(b"not audio at all" * 8)
    data = folder / "bad.json"
    data.write_text(json.dumps([audio_row("ok.wav"), audio_row(clip)]), encoding="utf-8")
    return data
