"""The Train form's *Embedding options*: shown for a sentence-transformers folder picked in the model
picker (which marks it " · embedding") or for any model with *Train as an embedding model* on; hidden
for a text model and whenever the switch says no; hidden at first in the built page."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest

from trainer_core.models.discovery import local_models
from trainer_core.settings import Settings
from ui.embedding_panel import SECTION, shown


@pytest.fixture
def settings(tiny_encoder_dir: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    roots = f"{tiny_encoder_dir.parent},{tiny_model_dir.parent}"
    return Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models", allowed_paths=roots)


def test_the_options_follow_the_picked_model_and_the_switch(settings, tiny_encoder_dir, tiny_model_dir):
    encoder, text = str(tiny_encoder_dir), str(tiny_model_dir)
    assert shown(encoder, "", settings) and not shown(text, "", settings)
    assert shown(text, "yes", settings) and not shown(encoder, "no", settings)
    assert not shown("", "", settings) and not shown(None, "", settings)
    labels = {m.value: m.label for m in local_models(settings)}
    assert labels[encoder].endswith(" · embedding") and "embedding" not in labels[text]


def test_the_built_form_hides_the_embedding_section_at_first():
    import gradio as gr

    from ui import train_widgets

    blocks: dict = {}
    with gr.Blocks():
        widgets = train_widgets.sections(blocks)
    assert blocks[SECTION].visible is False and "embedding_loss" in widgets
    assert all(block.visible for key, block in blocks.items() if key not in (SECTION, "audio"))


def test_hidden_options_neither_apply_nor_draw_a_refusal(settings, tiny_encoder_dir, tiny_model_dir, datasets_dir):
    """Matryoshka sizes typed for the encoder, then the switch set to no (the section hides): Start's
    request leaves them out instead of refusing them by a label the user cannot see; shown, they apply."""
    from trainer_core.fieldmeta import default
    from ui.embedding_panel import applied
    from ui.form import FORM_FIELDS, build_request, widget_value

    defaults = {name: widget_value(name, default(name)) for name in FORM_FIELDS}
    typed = {**defaults, "model_name": str(tiny_encoder_dir), "matryoshka_dims": [32, 16]}
    files = [str(datasets_dir / "alpaca_en_demo.json")]
    assert build_request(applied(typed, settings), files, []).matryoshka_dims == [32, 16]
    hidden = {**typed, "is_embedding": "no"}
    request = build_request(applied(hidden, settings), files, [])
    assert request.is_embedding is False and request.matryoshka_dims is None
    text = {**typed, "model_name": str(tiny_model_dir)}
    assert build_request(applied(text, settings), files, []).matryoshka_dims is None
