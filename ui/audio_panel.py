"""The Train form's *Audio options* (the fields of section ``audio``: sampling rate, longest clip,
language / task / timestamps for speech-to-text), shown only
while the chosen model's kind reads audio (``ModelKind.media``, from its config where it is on this
machine: ``data.local_kind``) or *Data has audio* (``is_dataset_audio``) says yes. Inside the
section, a field that some kind names as its own (``ModelKind.form_fields``: Whisper's language)
shows only while the chosen model's kind names it. A hidden field does not apply: the run takes its
default (``applied``), so a setting the user cannot see neither applies nor draws a refusal."""

from __future__ import annotations

from typing import Any

import gradio as gr

from trainer_core.fieldmeta import default, group
from trainer_core.model_kind import ModelKind, own_fields
from ui.form import FORM_FIELDS, TRI_VALUES, widget_value
from ui.vision_panel import model_kind

SECTION = "audio"  # the form section (request.sections) the panel shows and hides
AUDIO_FIELDS = tuple(name for name in FORM_FIELDS if group(name) == SECTION)


def shown(model_name: Any, is_dataset_audio: Any, settings: Any) -> bool:
    """True when the form should show *Audio options*: the model in the picker reads audio, or the
    data switch says yes."""
    return TRI_VALUES.get(is_dataset_audio) is True or "audio" in model_kind(model_name, settings).media


def field_shown(name: str, kind: ModelKind) -> bool:
    """True when field ``name`` of the section shows for a model of ``kind`` (a field no kind names
    as its own shows for every audio model)."""
    return name not in own_fields() or name in kind.form_fields


def visible_fields(model_name: Any, is_dataset_audio: Any, settings: Any) -> tuple[str, ...]:
    """The section's fields the form shows for these inputs (none while the section is hidden)."""
    if not shown(model_name, is_dataset_audio, settings):
        return ()
    kind = model_kind(model_name, settings)
    return tuple(name for name in AUDIO_FIELDS if field_shown(name, kind))


def applied(values: dict[str, Any], settings: Any) -> dict[str, Any]:
    """The form's ``values`` (by field name, as the widgets hold them) as the run takes them: a
    field of the section that is hidden (``visible_fields``) takes its default."""
    seen = visible_fields(values.get("model_name"), values.get("is_dataset_audio"), settings)
    return {
        name: widget_value(name, default(name)) if name in AUDIO_FIELDS and name not in seen else value
        for name, value in values.items()
    }


def wire(widgets: dict[str, gr.components.Component], block: gr.Accordion, settings: Any) -> None:
    """Show *Audio options* (``block``) and its fields for the model picker's model and the data
    switch, hide them otherwise (also when a settings file or a run fills the form)."""
    fields = [name for name in AUDIO_FIELDS if name in widgets]

    def show(model_name: Any, is_dataset_audio: Any) -> list[Any]:
        seen = visible_fields(model_name, is_dataset_audio, settings)
        return [gr.update(visible=bool(seen)), *(gr.update(visible=name in seen) for name in fields)]

    for trigger in ("model_name", "is_dataset_audio"):
        widgets[trigger].change(
            show,
            [widgets["model_name"], widgets["is_dataset_audio"]],
            [block, *(widgets[name] for name in fields)],
            queue=False,
            api_name=False,
            show_progress="hidden",
        )
