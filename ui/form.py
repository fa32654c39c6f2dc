"""Form widgets built from ``TrainingStartRequest``'s field metadata, and form values -> request.

Labels, help text, defaults, bounds and choices all come from the pydantic model; nothing here
repeats them. The dataset files come from the upload / path widgets in ``layout.py`` instead.
"""

from __future__ import annotations

import re
import typing
from typing import Any, Optional

import gradio as gr
from pydantic import BaseModel, SecretStr

from trainer_core.fieldmeta import FIELDS as REQUEST_FIELDS
from trainer_core.fieldmeta import base_type, bounds, choices, default
from trainer_core.request.lora import LLAMA_PROJECTIONS
from trainer_core.request.mappings import mapping_text, parse_mapping, read_text
from trainer_core.schemas import TrainingStartRequest
from ui.page_assets import UNSET_NUMBER
from ui.refusals import label_of
from ui.refused import Refused

# Fields the layout provides itself (file pickers) rather than from metadata.
FILE_FIELDS = ("local_datasets", "local_eval_datasets")
# Every request field but the files and the seed API's aliases (``"form": False``: use_lora, which
# the form's Training type already says).
FORM_FIELDS = tuple(
    name
    for name, info in REQUEST_FIELDS.items()
    if name not in FILE_FIELDS and (info.json_schema_extra or {}).get("form", True)
)


# An optional switch (e.g. is_dataset_image): empty leaves it to the studio.
TRI_STATE = [("found from the data", ""), ("yes", "yes"), ("no", "no")]


def tri_state(description: str) -> list[tuple[str, str]]:
    """TRI_STATE with its empty choice worded as the field's help says ("Empty: found from the
    model (...)" -> "found from the model"); TRI_STATE's own wording when the help says none."""
    empty = re.match(r"Empty: ([^.(:;]+)", description or "")
    return [(empty.group(1).strip(), ""), *TRI_STATE[1:]] if empty else TRI_STATE


TRI_VALUES = {"yes": True, "no": False}
# The empty choice of an optional list of choices (e.g. embedding_loss): the studio chooses.
AUTOMATIC = ("automatic", "")


class FieldNumber(gr.Number):
    """``gr.Number`` that hands out-of-bounds values to the handler instead of failing the event in
    Gradio (which paints "Error" over every output and names no field): the handler's pydantic model
    checks the same bounds and its message names the field. ``is_template`` makes the browser
    render it as a plain Number."""

    is_template = True  # no __init__ of its own: Gradio reads the props from gr.Number's signature
    field = "value"

    def preprocess(self, payload: float | None) -> float | int | None:
        if payload is None:
            return None
        try:
            return self.round_to_precision(payload, self.precision)
        except OverflowError:  # inf for an int field: pydantic says "finite number", naming the field
            return float(payload)
        except (TypeError, ValueError):
            raise Refused(
                f"{label_of(self.field) if self.field in REQUEST_FIELDS else self.field}: "
                f"'{str(payload)[:40]}' is not a number",
                fields=(self.field,),
            ) from None


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


# Names offered in the list fields' dropdowns (any other name can be typed; the check matches them against the model)
MAPPING_HINTS = {"custom_format_mapping": "instruction=question, output=answer", "resources_per_worker": "CPU=1, GPU=0"}

LIST_SUGGESTIONS = {
    "target_modules": ["all-linear", *LLAMA_PROJECTIONS],
    "modules_to_save": ["embed_tokens", "lm_head"],
}


def make_widget(name: str, suggestions: Optional[list[tuple[str, str]]] = None) -> gr.components.Component:
    """One Gradio input for request field ``name``, with its label, help, default and bounds.
    ``suggestions`` ((label, value) pairs) turn a text field into a dropdown that still takes any
    typed value (the model picker: local models listed, any Hub id typed)."""
    info = REQUEST_FIELDS[name]
    kind, value = base_type(info.annotation), default(name)
    common = {"label": label_of(name), "info": info.description, "elem_id": f"field-{name}"}
    if suggestions is not None:
        known = [v for _, v in suggestions]
        listed = suggestions if value in known or not value else [(value, value), *suggestions]
        return gr.Dropdown(choices=listed, value=value, allow_custom_value=True, filterable=True, **common)
    if (allowed := choices(kind)) is not None:
        if info.default is None:  # an optional choice (embedding_loss): empty leaves it to the studio
            return gr.Dropdown(choices=[AUTOMATIC, *allowed], value=widget_value(name, value), **common)
        return gr.Dropdown(choices=allowed, value=value, **common)
    if typing.get_origin(kind) is list and (allowed := choices(typing.get_args(kind)[0])) is not None:
        return gr.Dropdown(choices=allowed, value=value, multiselect=True, **common)  # e.g. report_to
    if name == "rewards":  # one reward per line in the short form (rewards.schemas.parse_reward)
        return gr.Textbox(
            value="", lines=3, placeholder="numeric_match column=answer weight=1\nformat weight=0.5", **common
        )
    if kind is bool and info.default is None:  # three states: empty (found for you), yes, no
        return gr.Dropdown(choices=tri_state(info.description), value=widget_value(name, value), **common)
    if kind is bool:
        return gr.Checkbox(value=value, **common)
    if kind in (int, float):
        empty = {"placeholder": UNSET_NUMBER} if info.default is None else {}  # Gradio shows 0 for None otherwise
        widget = FieldNumber(value=value, precision=0 if kind is int else None, **bounds(info), **empty, **common)
        widget.field = name
        return widget
    if kind is SecretStr:
        return gr.Textbox(value="", type="password", **common)
    if typing.get_origin(kind) is list:  # names typed or picked: target_modules, modules_to_save
        return gr.Dropdown(
            choices=LIST_SUGGESTIONS.get(name, []), value=value, multiselect=True, allow_custom_value=True, **common
        )
    if typing.get_origin(kind) is dict:  # a mapping typed as "a=b, c=d"
        hint = MAPPING_HINTS.get(name, "name=value")
        return gr.Textbox(value=widget_value(name, value) if value else "", placeholder=hint, **common)
    return gr.Textbox(value=value or "", **common)


def number_widgets(
    model: type[BaseModel], names: tuple[str, ...] = (), prefix: str = ""
) -> dict[str, gr.components.Component]:
    """A ``FieldNumber`` per numeric field of ``model`` (e.g. ``GenerationSettings``; only ``names``
    when given), with the field's label, description, default and bounds from its metadata; its
    element id is ``{prefix}field-{name}`` (a prefix keeps ids unique when two panels share a name)."""
    widgets = {}
    for name, info in model.model_fields.items():
        if names and name not in names:
            continue
        kind = base_type(info.annotation)
        limits = bounds(info)
        if info.default is None:  # optional: an empty box (sent as 0) means the default, never out of bounds
            limits.pop("minimum", None)
            limits["placeholder"] = UNSET_NUMBER  # shown empty, as its help says, not as Gradio's 0
        widget = FieldNumber(
            value=info.default,
            precision=0 if kind is int else None,
            label=info.title or _label(name),
            info=info.description,
            elem_id=f"{prefix}field-{name}",
            **limits,
        )
        widget.field = name
        widgets[name] = widget
    return widgets


def _clean(name: str, value: Any) -> Any:
    if typing.get_origin(base_type(REQUEST_FIELDS[name].annotation)) is dict and isinstance(value, str):
        if not value.strip() and REQUEST_FIELDS[name].default is None:
            return None  # an optional mapping left empty (embedding_columns)
        return parse_mapping(value, name)
    if name == "rewards" and isinstance(value, str):  # one reward a line (the short form), or a JSON list
        if value.strip().startswith("["):
            from trainer_core.rewards.schemas import json_text

            return json_text(value, "Rewards")
        return [line.strip() for line in value.splitlines() if line.strip()]
    if (isinstance(value, str) and not value.strip() or value == []) and REQUEST_FIELDS[name].default is None:
        return None  # an optional text or list left empty
    kind = base_type(REQUEST_FIELDS[name].annotation)
    if value == 0 and REQUEST_FIELDS[name].default is None and kind in (int, float) and not isinstance(value, bool):
        return None  # the browser sends an emptied number box as 0: an optional rate or size left unset
    if kind is bool and REQUEST_FIELDS[name].default is None and value in TRI_VALUES:
        return TRI_VALUES[value]
    if isinstance(value, float) and base_type(REQUEST_FIELDS[name].annotation) is int and value.is_integer():
        return int(value)
    return value


def clean_values(values: dict[str, Any]) -> dict[str, Any]:
    """Form widget values (by field name) as request values: the column mapping parsed, empty
    optional texts None, whole floats in int fields int; widgets without a value left out.
    Raises ValueError naming ``custom_format_mapping`` for a malformed mapping."""
    return {name: _clean(name, values[name]) for name in FORM_FIELDS if values.get(name) is not None}


def build_request(values: dict[str, Any], train_files: list[str], eval_files: list[str]) -> TrainingStartRequest:
    """Form values (by field name) + dataset paths -> a validated request. Raises ``Refused``
    naming the field for any invalid setting (its ``fields``: the widgets to mark)."""
    try:
        data = clean_values(values)
        return TrainingStartRequest(**data, local_datasets=train_files, local_eval_datasets=eval_files)
    except ValueError as exc:  # ValidationError is a ValueError, and so is a Refusal
        raise Refused.of(exc) from None


def widget_value(name: str, value: Any) -> Any:
    """A stored request value as form widget ``name`` shows it (mapping as "a=b, c=d", None as ""
    in a text box and as an empty number box)."""
    if typing.get_origin(base_type(REQUEST_FIELDS[name].annotation)) is dict:
        return mapping_text(read_text(value, name))  # a settings file may write the mapping as text
    if name == "rewards":
        from trainer_core.rewards.schemas import RewardSpec, reward_line

        return "\n".join(reward_line(RewardSpec(**spec) if isinstance(spec, dict) else spec) for spec in value or [])
    kind = base_type(REQUEST_FIELDS[name].annotation)
    if value is None and typing.get_origin(kind) is list:
        return []  # an empty multiselect (matryoshka_dims unset)
    if value is None and kind in (int, float):
        return None  # an empty number box (e.g. embedding_learning_rate unset), not the text ""
    if kind is bool and REQUEST_FIELDS[name].default is None:
        return "" if value is None else ("yes" if value else "no")  # TRI_STATE
    return "" if value is None else value


def form_values(request: dict[str, Any]) -> list[Any]:
    """Values for [server paths, eval paths, *form widgets] from a stored request (``public_dict``:
    the token is never stored, so it stays empty; fields newer than the run get their defaults)."""
    values = [", ".join(request.get("local_datasets", [])), ", ".join(request.get("local_eval_datasets", []))]
    return values + [widget_value(name, request.get(name, default(name))) for name in FORM_FIELDS]
