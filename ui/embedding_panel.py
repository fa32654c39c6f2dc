"""The Train form's *Embedding options* (the fields with ``embedding`` in their schema metadata:
loss, columns, Matryoshka sizes, query prompt, mini-batch size), shown only while the chosen model
is an embedder: a sentence-transformers folder (its model kind, ``data.local_kind``) or any model
with *Train as an embedding model* set to yes."""

from __future__ import annotations

from typing import Any

import gradio as gr

from trainer_core.fieldmeta import group
from ui.form import TRI_VALUES
from ui.vision_panel import model_kind

SECTION = "embedding"  # the form section (request.sections) the panel shows and hides


def shown(model_name: Any, is_embedding: Any, settings: Any) -> bool:
    """True when the form should show the embedding options: the switch says yes, or (left empty)
    the model in the picker is an embedding model; never when the switch says no."""
    if is_embedding in TRI_VALUES:
        return TRI_VALUES[is_embedding]
    return model_kind(model_name, settings).name == "embedding"


def applied(values: dict[str, Any], settings: Any) -> dict[str, Any]:
    """The form's ``values`` (by field name) as the run takes them: while the section is hidden
    (``shown`` is False) its fields are left empty, so a setting the user cannot see neither applies
    nor draws a refusal that points at a hidden section."""
    if shown(values.get("model_name"), values.get("is_embedding"), settings):
        return values
    return {name: None if group(name) == SECTION else value for name, value in values.items()}


def wire(widgets: dict[str, gr.components.Component], block: gr.Accordion, settings: Any) -> None:
    """Show *Embedding options* (``block``) when the model picker or the switch make the run an
    embedding run, hide it otherwise (also when a settings file or a run fills the form)."""

    def show(model_name: Any, is_embedding: Any) -> Any:
        return gr.update(visible=shown(model_name, is_embedding, settings))

    for trigger in ("model_name", "is_embedding"):
        widgets[trigger].change(
            show,
            [widgets["model_name"], widgets["is_embedding"]],
            block,
            queue=False,
            api_name=False,
            show_progress="hidden",
        )
