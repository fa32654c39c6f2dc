"""The Train form's *Audio options*: shown while the picked model's kind reads audio or *Data has
audio* says yes, with a kind's own fields (a speech-to-text model's language / task / timestamps)
only for that kind; hidden at first in the built page; hidden settings take their defaults. Toy
audio kinds (``tests.support.audio_kinds``) stand for the real ones."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest

from tests.support.audio_kinds import AUDIO_CHAT, SPEECH, registered, toy_model
from trainer_core.fieldmeta import default
from trainer_core.settings import Settings
from ui.audio_panel import AUDIO_FIELDS, SECTION, applied, shown, visible_fields
from ui.form import FORM_FIELDS, build_request, widget_value


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, str, str, str]:
    """(settings, a toy speech-to-text folder, a toy audio chat folder, a text model folder)."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    settings = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "none", allowed_paths=str(tmp_path))
    text = tmp_path / "text"
    text.mkdir()
    (text / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    speech, chat = toy_model(tmp_path / "speech", SPEECH), toy_model(tmp_path / "chat", AUDIO_CHAT)
    return settings, str(speech), str(chat), str(text)


def test_the_section_and_its_fields_follow_the_model_and_the_switch(models) -> None:
    settings, speech, chat, text = models
    assert set(AUDIO_FIELDS) == {
        "sampling_rate",
        "max_audio_seconds",
        "language",
        "task",
        "return_timestamps",
        "speaker_column",  # text-to-speech's own (``TEXT_TO_SPEECH.form_fields``): shown for a CSM model alone
        "audio_codec",  # Orpheus' own (``ORPHEUS.form_fields``): the SNAC codec's folder or Hub id
    }
    with registered(SPEECH, AUDIO_CHAT):
        assert shown(speech, "", settings) and shown(chat, "", settings) and not shown(text, "", settings)
        assert shown(text, "yes", settings) and not shown("", "", settings)
        assert visible_fields(speech, "", settings) == (
            "sampling_rate",
            "max_audio_seconds",
            "language",
            "task",
            "return_timestamps",
        )
        assert visible_fields(chat, "", settings) == ("sampling_rate", "max_audio_seconds")
        assert visible_fields(text, "yes", settings) == ("sampling_rate", "max_audio_seconds")
        assert visible_fields(text, "", settings) == ()
    assert not shown(speech, "", settings)  # no kind reads audio once the toys are gone


def test_hidden_settings_take_their_defaults(models, datasets_dir: Path) -> None:
    settings, speech, chat, text = models
    typed = {name: widget_value(name, default(name)) for name in FORM_FIELDS}
    typed.update(language="de", task="translate", return_timestamps=True, max_audio_seconds=12.5)
    files = [str(datasets_dir / "mllm_audio_demo.json")]
    with registered(SPEECH, AUDIO_CHAT):
        whisper = build_request(applied({**typed, "model_name": speech}, settings), files, [])
        qwen = build_request(applied({**typed, "model_name": chat}, settings), files, [])
        plain = build_request(applied({**typed, "model_name": text}, settings), files, [])
    assert (whisper.language, whisper.task, whisper.return_timestamps, whisper.max_audio_seconds) == (
        "de",
        "translate",
        True,
        12.5,
    )
    assert (qwen.language, qwen.task, qwen.return_timestamps, qwen.max_audio_seconds) == (None, None, False, 12.5)
    assert (plain.language, plain.max_audio_seconds) == (None, default("max_audio_seconds"))


def test_the_built_form_hides_the_audio_section_at_first() -> None:
    import gradio as gr

    from ui import train_widgets

    blocks: dict = {}
    with gr.Blocks():
        widgets = train_widgets.sections(blocks)
    assert blocks[SECTION].visible is False and set(AUDIO_FIELDS) <= set(widgets)
    assert widgets["is_dataset_audio"].visible is not False  # the data switch stays in Data options
