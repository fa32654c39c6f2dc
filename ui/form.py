"""Form widgets built from ``TrainingStartRequest``'s field metadata, and form values -> request.

Labels, help text, defaults, bounds and choices all come from the pydantic model; nothing here
repeats them. The dataset files come from the upload / path widgets in ``layout.py`` instead.
"""

from __future__ import annotations

from typing import Any

import gradio as gr
from pydantic import BaseModel, SecretStr, ValidationError

from trainer_core.fieldmeta import FIELDS as REQUEST_FIELDS
from trainer_core.fieldmeta import base_type, bounds, choices, default, explain, parse_mapping
from trainer_core.schemas import LLAMA_PROJECTIONS, TrainingStartRequest
# Fields the layout provides itself (file pickers) rather than from metadata.
FILE_FIELDS = ("local_datasets", "local_eval_datasets")
FORM_FIELDS = tuple(name for name in REQUEST_FIELDS if name not in FILE_FIELDS)


class FieldNumber(gr.Number):
    """``gr.Number`` whose out-of-bounds error names the request field (Gradio's own does not).
    ``is_template`` makes the browser render it as a plain Number."""

    is_template = True  # no __init__ of its own: Gradio reads the props from gr.Number's signature
    field = "value"

    def preprocess(self, payload: float | None) -> float | int | None:
        try:
            return super().preprocess(payload)
        except gr.Error as exc:
            raise gr.Error(f"{self.field}: {exc.message}") from None


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def make_widget(name: str) -> gr.components.Component:
    """One Gradio input for request field ``name``, with its label, help, default and bounds."""
    info = REQUEST_FIELDS[name]
    kind, value = base_type(info.annotation), default(name)
    common = {"label": info.title or _label(name), "info": info.description, "elem_id": f"field-{name}"}
    if (allowed := choices(kind)) is not None:
        return gr.Dropdown(choices=allowed, value=value, **common)
    if kind is bool:
        return gr.Checkbox(value=value, **common)
    if kind in (int, float):
        widget = FieldNumber(value=value, precision=0 if kind is int else None, **bounds(info), **common)
        widget.field = name
        return widget
    if kind is SecretStr:
        return gr.Textbox(value="", type="password", **common)
    if name == "target_modules":
        return gr.Dropdown(choices=[*LLAMA_PROJECTIONS, "all-linear"], value=value, multiselect=True,
                           allow_custom_value=True, **common)
    if name == "custom_format_mapping":
        return gr.Textbox(value="", placeholder="instruction=question, output=answer", **common)
    return gr.Textbox(value=value or "", **common)


def number_widgets(model: type[BaseModel], names: tuple[str, ...] = (), prefix: str = "") -> dict[str, gr.components.Component]:
    """A ``FieldNumber`` per numeric field of ``model`` (e.g. ``GenerationSettings``; only ``names``
    when given), with the field's label, description, default and bounds from its metadata; its
    element id is ``{prefix}field-{name}`` (a prefix keeps ids unique when two panels share a name)."""
    widgets = {}
    for name, info in model.model_fields.items():
        if names and name not in names:
            continue
        kind = base_type(info.annotation)
        widget = FieldNumber(value=info.default, precision=0 if kind is int else None, label=info.title or _label(name),
                             info=info.description, elem_id=f"{prefix}field-{name}", **bounds(info))
        widget.field = name
        widgets[name] = widget
    return widgets


def _clean(name: str, value: Any) -> Any:
    if name == "custom_format_mapping":
        return parse_mapping(value)
    if isinstance(value, str) and not value.strip() and REQUEST_FIELDS[name].default is None:
        return None
    if isinstance(value, float) and base_type(REQUEST_FIELDS[name].annotation) is int and value.is_integer():
        return int(value)
    return value


def build_request(values: dict[str, Any], train_files: list[str], eval_files: list[str]) -> TrainingStartRequest:
    """Form values (by field name) + dataset paths -> a validated request. Raises ``gr.Error``
    naming the field for any invalid setting."""
    try:
        data = {name: _clean(name, values[name]) for name in FORM_FIELDS if values.get(name) is not None}
        return TrainingStartRequest(**data, local_datasets=train_files, local_eval_datasets=eval_files)
    except ValueError as exc:  # ValidationError is a ValueError
        raise gr.Error(explain(exc) if isinstance(exc, ValidationError) else str(exc)) from None
