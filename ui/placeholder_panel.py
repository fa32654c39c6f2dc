"""The Train form's placeholder fields: when the previewed data file still holds template
placeholders such as ``{{name}}`` (LLaMA-Factory's identity.json), one text field per placeholder
under the preview, a *Fill in* button that makes a filled copy (``data.fill``; the original file is
untouched) and puts it in the upload box, and an explicit *Train with them as they are*. Start
refuses while placeholders remain and that box is not ticked (``gate``)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Optional

import gradio as gr

from trainer_core.admission.request_paths import confine_dataset
from trainer_core.data.errors import DatasetError
from trainer_core.data.fill import fill_file
from trainer_core.data.placeholders import PlaceholderCount
from ui.refused import Refused
from ui.uploads import received_upload, split_paths

MAX_FIELDS = 6  # a file with more placeholders is filled with an editor or a script (the preview says so)
AS_IS_LABEL = "Train with the placeholders as they are"
FIELD_LABEL = "Value for {{%s}}"


def build() -> dict[str, Any]:
    """The hidden group (``#placeholders``): the names found (a State), MAX_FIELDS text fields
    (``#placeholder-<i>``), the Fill in button (``#fill-placeholders``), the as-is box
    (``#placeholders-as-is``) and the result line (``#placeholders-note``)."""
    names = gr.State([])
    with gr.Group(visible=False, elem_id="placeholders") as group:
        gr.Markdown(
            "**Fill in the template placeholders.** Training uses a filled copy; the original file is not changed.",
            elem_id="placeholders-head",
        )
        with gr.Row():
            fields = [
                gr.Textbox(label=f"Value {i + 1}", visible=False, elem_id=f"placeholder-{i}", max_lines=1)
                for i in range(MAX_FIELDS)
            ]
        with gr.Row():
            fill = gr.Button("Fill in", variant="primary", elem_id="fill-placeholders", min_width=80, scale=0)
            as_is = gr.Checkbox(label=AS_IS_LABEL, value=False, elem_id="placeholders-as-is")
        note = gr.Markdown("", elem_id="placeholders-note")
    return {"names": names, "group": group, "fields": fields, "fill": fill, "as_is": as_is, "note": note}


def outputs(panel: dict[str, Any]) -> list[Any]:
    """What every preview refresh sets: the names, the group and the fields (``updates``' order)."""
    return [panel["names"], panel["group"], *panel["fields"]]


def updates(found: list[PlaceholderCount]) -> list[Any]:
    """``outputs``' values for the placeholders ``found`` in the previewed file (none: hidden). A
    field's typed value is kept across refreshes; only its label and visibility change."""
    names = [p.name for p in found][:MAX_FIELDS]
    fields = [
        gr.update(label=FIELD_LABEL % names[i], visible=True) if i < len(names) else gr.update(visible=False)
        for i in range(MAX_FIELDS)
    ]
    return [names, gr.update(visible=bool(names)), *fields]


def _source(ctx: Any, upload: Optional[str], typed: list[str]) -> tuple[Path, bool]:
    """(the previewed file, whether it came from the typed paths), confined as the preview's."""
    received = received_upload(upload, ctx.settings)
    if received is not None:
        return received, False
    if not typed:
        raise Refused("local_datasets: choose a dataset file first", fields=("local_datasets",))
    return Path(confine_dataset(typed[0], list(ctx.settings.allowed_roots), "dataset path")), True


def fill(ctx: Any, upload: Optional[str], paths_text: str, names: list[str], *values: str) -> tuple[Any, Any, str]:
    """Fill the previewed file's placeholders ``names`` with ``values`` (the fields in order) into a
    kept copy; returns (the upload box's new value: the copy, the typed paths without the file filled,
    the result line). A refusal (no file, no value, a bad value, a file that cannot be filled) leaves
    the form as it is and says why in the result line."""
    typed = split_paths(paths_text if isinstance(paths_text, str) else "")
    try:
        source, was_typed = _source(ctx, upload, typed)
        copy, counts = fill_file(source, dict(zip(names or [], values)), ctx.settings.uploads_dir)
    except gr.Error as exc:
        return gr.skip(), gr.skip(), f"**Not filled:** {html.escape(exc.message)}"
    except (DatasetError, ValueError, OSError) as exc:  # (RecursionError is DatasetError by then)
        return gr.skip(), gr.skip(), f"**Not filled:** {html.escape(str(exc))}"
    done = ", ".join(f"`{{{{{name}}}}}` in {rows} rows" for name, rows in counts.items())
    note = (
        f"Filled in {done}: training uses the copy {html.escape(copy.name)}; {html.escape(source.name)} is unchanged."
    )
    return str(copy), ", ".join(typed[1:]) if was_typed else gr.skip(), note


def gate(names: Optional[list[str]], as_is: bool) -> None:
    """Start's rule on the page: refuse while the previewed file still holds placeholders and
    *Train with them as they are* is not ticked. Raises ``Refused`` naming the placeholders."""
    if names and not as_is:
        listed = ", ".join(f"{{{{{name}}}}}" for name in names)
        raise Refused(
            f"local_datasets: the data still holds template placeholders {listed}: type their values "
            f"under the dataset preview and press Fill in, or tick “{AS_IS_LABEL}”",
            fields=("local_datasets",),
        )
