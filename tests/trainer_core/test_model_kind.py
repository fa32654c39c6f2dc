"""The model-kind registry (``trainer_core.model_kind``): its order and fallback, and a toy kind
registered in a fixture that the model picker, the check and a request's detection see without any
other module knowing of it (what adding a kind takes: its folder and its registration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import huggingface_hub.constants
import pytest

from trainer_core import model_kind
from trainer_core.data.local_kind import named_kind, request_kind
from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.kinds.causal.kind import CAUSAL
from trainer_core.kinds.orpheus.kind import ORPHEUS
from trainer_core.kinds.speech_to_text.kind import SPEECH_TO_TEXT
from trainer_core.kinds.text_to_speech.kind import TEXT_TO_SPEECH
from trainer_core.kinds.vision.kind import VISION
from trainer_core.model_kind import ModelKind
from trainer_core.models.discovery import local_models
from trainer_core.preflight.check import run_preflight
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings

QWEN2_VL = {"model_type": "qwen2_vl", "vision_config": {"depth": 2}}
TOY_TYPE = "toy_kind_for_tests"  # a model_type no library knows


class ToyKind(ModelKind):
    """A kind that only names itself: detected by its made-up ``model_type``."""

    name = "toy"
    label = "toy"

    def family(self, config: Any) -> Optional[str]:
        model_type = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)
        return "Toy-1" if model_type == TOY_TYPE else None

    def picker_note(self, config: dict) -> str:
        return " · toy (Toy-1)" if self.family(config) else ""

    def check_line(self, request: Any, settings: Any, folder: Optional[Path]) -> Optional[str]:
        return f"toy: {self.family(model_kind.folder_config(folder))} in {folder.name}"


@pytest.fixture
def toy() -> Any:
    """The toy kind, registered for one test only."""
    kind = model_kind.register(ToyKind())
    yield kind
    model_kind.unregister(kind)


@pytest.fixture
def toy_folder(tmp_path: Path) -> Path:
    """A model folder whose config.json has the toy's model_type (no weights, no tokenizer)."""
    folder = tmp_path / "models" / "toy-model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": TOY_TYPE}), encoding="utf-8")
    return folder.resolve()


def test_the_built_in_kinds_are_vision_audio_chat_then_the_causal_fallback() -> None:
    assert model_kind.kinds()[-3:] == (VISION, AUDIO_CHAT, CAUSAL)
    assert model_kind.kind_of(QWEN2_VL) is VISION and VISION.family(QWEN2_VL) == "Qwen2-VL"
    assert model_kind.kind_of({"model_type": "llama"}) is CAUSAL and model_kind.kind_of(None) is CAUSAL
    assert model_kind.kind_of({"model_type": "gemma3_text"}) is CAUSAL  # text-only config of a vision family
    assert model_kind.kind_named("vision") is VISION and model_kind.kind_named("unknown") is CAUSAL
    assert model_kind.picker_note(QWEN2_VL) == " · vision (Qwen2-VL)" and model_kind.picker_note({}) == ""
    assert model_kind.reader_of("image") is VISION and model_kind.reader_of("video") is None
    assert model_kind.readers_of("audio") == (SPEECH_TO_TEXT, TEXT_TO_SPEECH, ORPHEUS, AUDIO_CHAT)


def test_a_folder_without_a_readable_config_is_the_fallback(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[1, 2]", encoding="utf-8")  # JSON, not an object
    assert model_kind.folder_config(tmp_path) is None and model_kind.folder_config(None) is None
    assert model_kind.kind_for_folder(tmp_path) is CAUSAL and model_kind.kind_for_folder(tmp_path / "none") is CAUSAL


def test_a_registered_kind_is_asked_first_and_leaves_when_unregistered() -> None:
    class Everything(ModelKind):
        name = "everything"

        def family(self, config: Any) -> Optional[str]:
            return "all"

    kind = model_kind.register(Everything())
    try:
        assert model_kind.kinds()[0] is kind and model_kind.kind_of(QWEN2_VL) is kind
    finally:
        model_kind.unregister(kind)
    assert kind not in model_kind.kinds() and model_kind.kind_of(QWEN2_VL) is VISION
    with pytest.raises(ValueError):
        model_kind.unregister(kind)


def test_a_toy_kind_is_seen_by_the_picker_the_check_and_the_detection(
    toy: ModelKind, toy_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    settings = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models", allowed_paths=str(tmp_path))
    labels = {m.value: m.label for m in local_models(settings)}
    assert labels[str(toy_folder)] == f"toy-model · {toy_folder.parent} · toy (Toy-1)"  # the model picker

    request = TrainingStartRequest(model_name=str(toy_folder), local_datasets=[_rows(tmp_path)])
    assert request_kind(request) is toy and named_kind(str(toy_folder), settings) is toy  # a request's kind
    report = run_preflight(request, settings, estimates=False)  # the check
    assert report.vision == "toy: Toy-1 in toy-model" and report.rows_kept == 2


def _rows(folder: Path) -> str:
    path = folder / "rows.json"
    rows = [
        {"instruction": "Say hi.", "input": "", "output": "Hi!"},
        {"instruction": "2+2?", "input": "", "output": "4"},
    ]
    path.write_text(json.dumps(rows), encoding="utf-8")
    return str(path)
