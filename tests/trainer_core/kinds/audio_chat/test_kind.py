"""Which models are audio-in chat models: from config.json (Qwen2-Audio), marked in the picker; the
GGUF export's projector where llama.cpp's converter writes one, refused with the reason where not."""

from __future__ import annotations

from pathlib import Path

from trainer_core.kinds.audio_chat.export import projector_problem
from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.model_kind import folder_config, kind_for_folder, kind_of, picker_note, reader_of

QWEN2_AUDIO = {
    "model_type": "qwen2_audio",
    "audio_config": {"d_model": 64},
    "architectures": ["Qwen2AudioForConditionalGeneration"],
}


def test_the_tiny_qwen2_audio_is_an_audio_chat_model_in_the_picker(tiny_audio_chat_dir):
    assert kind_for_folder(tiny_audio_chat_dir) is AUDIO_CHAT
    assert picker_note(folder_config(tiny_audio_chat_dir), tiny_audio_chat_dir) == " · audio chat (Qwen2-Audio)"
    assert AUDIO_CHAT.model_class().__name__ == "AutoModelForMultimodalLM"


def test_other_models_are_not_claimed():
    assert kind_of(QWEN2_AUDIO) is AUDIO_CHAT
    assert AUDIO_CHAT.family({"model_type": "qwen2_audio"}) is None  # no audio tower
    assert AUDIO_CHAT.family({"model_type": "llama"}) is None
    assert kind_of({"model_type": "qwen2_vl", "vision_config": {"depth": 2}}).name == "vision"
    assert AUDIO_CHAT.family({"model_type": "whisper", "d_model": 384}) is None
    assert reader_of("audio") is not None and "audio" in reader_of("audio").media


def write_converter(folder: Path, projectors: list[str]) -> Path:
    (folder / "conversion").mkdir(parents=True)
    (folder / "conversion" / "__init__.py").write_text(f"MMPROJ_MODEL_MAP = {dict.fromkeys(projectors, 'x')!r}\n")
    return folder


def test_gguf_needs_the_converters_audio_projector(tmp_path):
    knows = write_converter(tmp_path / "new", ["Qwen2AudioForConditionalGeneration"])
    assert projector_problem(QWEN2_AUDIO, knows) is None
    older = write_converter(tmp_path / "old", ["Qwen2VLForConditionalGeneration"])
    problem = projector_problem(QWEN2_AUDIO, older)
    assert problem.startswith("GGUF export of Qwen2-Audio needs llama.cpp's projector file (mmproj) for its audio")
    assert "Qwen2AudioForConditionalGeneration" in problem and AUDIO_CHAT.gguf_problem(QWEN2_AUDIO, older) == problem
