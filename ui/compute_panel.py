"""The Train form's Ray settings (``ray_address``, ``num_workers``, ``resources_per_worker``,
``use_gpu``: ``compute: ray`` in their schema metadata), shown only while *Compute* is ray (also
when a settings file or a run fills the form)."""

from __future__ import annotations

from typing import Any

import gradio as gr

from trainer_core.fieldmeta import for_compute
from ui.form import FORM_FIELDS

RAY_FIELDS = tuple(name for name in FORM_FIELDS if for_compute(name) == "ray")


def hide(widgets: dict[str, gr.components.Component]) -> None:
    """Hide the Ray settings at first (compute is local by default)."""
    for name in RAY_FIELDS:
        widgets[name].visible = False


def wire(widgets: dict[str, gr.components.Component]) -> None:
    """Show the Ray settings when *Compute* becomes ray, hide them when it goes back to local."""

    def show(compute: Any) -> list[Any]:
        return [gr.update(visible=compute == "ray") for _ in RAY_FIELDS]

    widgets["compute"].change(
        show, widgets["compute"], [widgets[name] for name in RAY_FIELDS], queue=False, api_name=False,
        show_progress="hidden",
    )  # fmt: skip
