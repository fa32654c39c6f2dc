"""The Train form's image settings (``is_dataset_image``, ``vision_image_size``,
``finetune_vision_layers``: ``vision`` in their schema metadata), shown only while the chosen model
reads images (its model kind, from its config where it is on this machine: ``data.local_kind``),
with a note under the model picker naming the family."""

from __future__ import annotations

from typing import Any

import gradio as gr

from trainer_core.fieldmeta import for_vision
from ui.form import FORM_FIELDS

VISION_FIELDS = tuple(name for name in FORM_FIELDS if for_vision(name))


def model_kind(model_name: Any, settings: Any) -> Any:
    """The ``ModelKind`` of the model named in the picker (the text LM when it is not here or empty)."""
    from trainer_core.data.local_kind import named_kind

    return named_kind(model_name, settings)


def hide(widgets: dict[str, gr.components.Component]) -> None:
    """Hide the image settings at first (the default model reads text only)."""
    for name in VISION_FIELDS:
        widgets[name].visible = False


def wire(widgets: dict[str, gr.components.Component], settings: Any) -> None:
    """Show the image settings when the model picker names a vision-language model, hide them
    otherwise (also when a settings file or a run fills the form)."""

    def show(model_name: Any) -> list[Any]:
        reads_images = "image" in model_kind(model_name, settings).media
        return [gr.update(visible=reads_images) for _ in VISION_FIELDS]

    widgets["model_name"].change(
        show,
        widgets["model_name"],
        [widgets[name] for name in VISION_FIELDS],
        queue=False,
        api_name=False,
        show_progress="hidden",
    )
