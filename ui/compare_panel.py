"""Functions behind the Runs tab's comparison and labels: the runs to pick from, the overlay figure
with the settings diff, and a run's editable name and note.

Every value may come from a raw queue call rather than the page, so each is checked here: job ids
are text naming known runs (at most ``compare.MAX_RUNS``), the smoothing a number in [0, 0.99], the
x axis one of ``compare.X_AXES``; a bad one is a ``gr.Error`` whose text quotes no more than 60
escaped characters of it. Names and notes are plain text: the table and the text boxes show them as
typed, and the figure escapes them (``compare_view``)."""

from __future__ import annotations

import html
import math
from functools import partial
from types import SimpleNamespace
from typing import Any, Optional

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from trainer_core.runs import compare
from trainer_core.runs.store import NAME_MAX_CHARS, NOTE_MAX_CHARS, RunRecord
from ui import compare_view
from ui.context import Context
from ui.refused import Refused
from ui.run_filters import ALL_STATUSES, STATUS_CHOICES
from ui.run_handlers import runs_table
from ui.tables import fit_table

PICKER_RUNS = 200  # runs the compare picker offers (a job id typed in is taken too)


def _quoted(value: Any) -> str:
    """At most 60 characters of ``value``, HTML-escaped, for an error message."""
    text = str(value)
    return html.escape(text if len(text) <= 60 else text[:60] + "…")


def choices(ctx: Context, chosen: Optional[list] = None) -> dict:
    """The compare picker's update: the newest ``PICKER_RUNS`` remembered runs as (``run_label``,
    job id), read without their settings (``RunStore.run_labels``); the value becomes those of
    ``chosen`` that are among them (None: the value is left as it is)."""
    labels = ctx.runner.store.run_labels(PICKER_RUNS)
    options = [(compare.run_label(SimpleNamespace(job_id=job_id, name=name)), job_id) for job_id, name in labels]
    if chosen is None:
        return gr.update(choices=options)
    known = {job_id for job_id, _ in labels}
    chosen = chosen if isinstance(chosen, list) else [chosen]
    return gr.update(choices=options, value=[j for j in chosen if isinstance(j, str) and j in known])


def _runs(ctx: Context, job_ids: Any) -> list[RunRecord]:
    """The runs named by ``job_ids`` (a list of job ids, no repeats kept), in the order given."""
    if job_ids is None:
        return []
    if isinstance(job_ids, str):
        job_ids = [job_ids]
    if not isinstance(job_ids, list) or not all(isinstance(j, str) for j in job_ids):
        raise Refused("Choose runs by their job ids.")
    job_ids = list(dict.fromkeys(j.strip() for j in job_ids if j.strip()))
    if len(job_ids) > compare.MAX_RUNS:
        raise Refused(f"Compare at most {compare.MAX_RUNS} runs at once ({len(job_ids)} chosen).")
    runs = []
    for job_id in job_ids:
        run = ctx.runner.store.get_record(job_id) if len(job_id) <= 200 else None
        if run is None:
            raise Refused(f"No run '{_quoted(job_id)}': refresh the list and choose again.")
        runs.append(run)
    return runs


def _smoothing(value: Any) -> float:
    """The smoothing weight, checked: a number in [0, ``compare.MAX_SMOOTHING``]."""
    if value is None:
        return 0.0
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= compare.MAX_SMOOTHING
    ):
        raise Refused(f"Smoothing must be a number from 0 to {compare.MAX_SMOOTHING}, not '{_quoted(value)}'.")
    return float(value)


def compare_runs(
    ctx: Context, job_ids: Any, x_axis: Any = "step", smoothing: Any = 0.0
) -> tuple[go.Figure, pd.DataFrame]:
    """(overlay figure, settings diff) of the chosen runs: loss and eval loss against steps or
    tokens seen, smoothed with TensorBoard's EMA (``compare.ema``), downsampled; the diff lists only
    the settings that differ, then final loss, best eval loss, training time and tokens/s (and an
    embedding run's last retrieval metrics)."""
    if x_axis not in compare.X_AXES:
        raise Refused(f"The x axis must be one of {', '.join(compare.X_AXES)}, not '{_quoted(x_axis)}'.")
    weight = _smoothing(smoothing)
    runs = _runs(ctx, job_ids)
    series = compare.SHARED.load(ctx.runner.store, runs, x_axis)
    figure = compare_view.overlay_figure(compare.curves(series, weight), x_axis, weight)
    return figure, compare_view.diff_frame(runs, compare.final_values(ctx.runner.store, runs))


def label_fields(ctx: Context, job_id: Optional[str]) -> tuple[str, str]:
    """(name, note) of run ``job_id`` for the editor; blank for no or an unknown run."""
    job_id = job_id.strip() if isinstance(job_id, str) else ""
    run = ctx.runner.store.get_record(job_id) if 0 < len(job_id) <= 200 else None
    return ("", "") if run is None else (run.name or "", run.note or "")


def save_label(
    ctx: Context,
    job_id: Optional[str],
    name: Any,
    note: Any,
    name_filter: Optional[str] = "",
    status_filter: Optional[str] = "all",
    dataset_filter: Optional[str] = "",
) -> tuple[pd.DataFrame, dict]:
    """Store run ``job_id``'s name and note (``RunStore.set_label``: stripped, limits checked;
    blank clears), then return the filtered runs table and the compare picker's update. A missing
    run, non-text or an over-long name or note is a ``gr.Error``."""
    job_id = job_id.strip() if isinstance(job_id, str) else ""
    if not job_id:
        raise Refused("Click a run in the table first.")
    if not isinstance(name, str) or not isinstance(note, str):
        raise Refused("The name and the note must be text.")
    try:
        found = ctx.runner.store.set_label(job_id, name=name, note=note) if len(job_id) <= 200 else False
    except ValueError as exc:
        raise Refused(f"Not saved: the {exc}.") from None
    if not found:
        raise Refused(f"No run '{_quoted(job_id)}': click a run in the table first.")
    gr.Info(f"Saved the name and note of {job_id}.")
    return runs_table(ctx, name_filter, status_filter, dataset_filter), choices(ctx)


# ----- the components and their events (called inside the Runs tab's Blocks context) -----
FREE = dict(concurrency_limit=None)  # reads and one small write; no shared hardware


def build_filters() -> list[gr.components.Component]:
    """The filter row above the runs table: [name contains, status, dataset contains]. Each has a
    value, so API clients may call ``/runs`` without arguments (all runs)."""
    with gr.Row(elem_id="runs-filters"):
        name = gr.Textbox(
            "",
            label="Name or job id contains",
            placeholder="Enter to filter",
            max_lines=1,
            max_length=200,
            elem_id="filter-name",
            scale=2,
        )
        status = gr.Dropdown(
            label="Status", choices=STATUS_CHOICES, value=ALL_STATUSES, elem_id="filter-status", scale=1
        )
        dataset = gr.Textbox(
            "",
            label="Dataset contains",
            placeholder="Enter to filter",
            max_lines=1,
            max_length=200,
            elem_id="filter-dataset",
            scale=2,
        )
    return [name, status, dataset]


def wire_filters(ctx: Context, filters: list, table: gr.Dataframe) -> None:
    """Enter in a text filter, or a new status, filters the table (the Refresh event ``runs`` takes
    the same inputs)."""
    name, status, dataset = filters
    gr.on(
        [name.submit, status.change, dataset.submit], partial(runs_table, ctx), filters, table, api_name=False, **FREE
    )


def build_label_editor(
    ctx: Context, selected: gr.Textbox, filters: list, table: gr.Dataframe, picker: gr.Dropdown
) -> None:
    """Name and note of the selected run, with Save (event ``run_label``)."""
    with gr.Row(elem_id="run-label"):
        name = gr.Textbox(label="Name", max_lines=1, max_length=NAME_MAX_CHARS, elem_id="run-name", scale=2)
        note = gr.Textbox(label="Note", lines=2, max_length=NOTE_MAX_CHARS, elem_id="run-note", scale=4)
        save = gr.Button("Save name and note", size="sm", elem_id="run-label-save", scale=1)
    selected.change(partial(label_fields, ctx), selected, [name, note], api_name=False, **FREE)
    save.click(
        partial(save_label, ctx), [selected, name, note, *filters], [table, picker], api_name="run_label", **FREE
    )


def build_compare(ctx: Context) -> gr.Dropdown:
    """The closed "Compare runs" section: runs picker, x axis, smoothing, the overlay figure and the
    settings diff (event ``compare_runs`` on any change); returns the picker."""
    with gr.Accordion("Compare runs", open=False, elem_id="compare"):
        with gr.Row():
            picker = gr.Dropdown(
                label=f"Runs to compare (up to {compare.MAX_RUNS})",
                choices=[],
                value=[],
                multiselect=True,
                max_choices=compare.MAX_RUNS,
                allow_custom_value=True,
                elem_id="compare-runs",
                scale=4,
            )
            x_axis = gr.Radio(
                [("step", "step"), ("tokens seen", "tokens")],
                value="step",
                label="x axis",
                elem_id="compare-x",
                scale=1,
            )
            smoothing = gr.Slider(
                0,
                compare.MAX_SMOOTHING,
                value=0.6,
                step=0.01,
                label="Smoothing (EMA)",
                info="As TensorBoard's; the raw points stay visible, faint.",
                elem_id="compare-smoothing",
                scale=2,
            )
        plot = gr.Plot(show_label=False, elem_id="compare-plot")
        diff = fit_table(compare_view.EMPTY_DIFF, "compare-diff", 400)
    gr.on(
        [picker.change, x_axis.change, smoothing.change],
        partial(compare_runs, ctx),
        [picker, x_axis, smoothing],
        [plot, diff],
        api_name="compare_runs",
        trigger_mode="always_last",
        show_progress="hidden",
        **FREE,
    )
    return picker
