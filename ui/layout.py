"""The Gradio Blocks: model, dataset (+ preview), settings accordions, Start / Stop / Cancel, status
and charts. Widgets come from the schema (``ui.form``); behaviour lives in ``ui.handlers``."""

from __future__ import annotations

from functools import partial

import gradio as gr
import pandas as pd

from trainer_core.job import JobRunner
from ui import handlers
from trainer_core.fieldmeta import group
from ui.form import FORM_FIELDS, make_widget

SECTIONS = (  # (schema group, accordion title, open)
    ("data", "Data options", False),
    ("training", "Hyperparameters", False),
    ("lora", "LoRA", False),
    ("output", "Output", False),
)
DATASET_TYPES = [".json", ".jsonl", ".csv", ".parquet", ".txt"]


def _build_settings() -> dict[str, gr.components.Component]:
    widgets = {}
    with gr.Group():
        for name in (n for n in FORM_FIELDS if group(n) == "model"):
            widgets[name] = make_widget(name)
    for section, title, is_open in SECTIONS:
        with gr.Accordion(title, open=is_open):
            for name in (n for n in FORM_FIELDS if group(n) == section):
                widgets[name] = make_widget(name)
    return widgets


def build_ui(runner: JobRunner) -> gr.Blocks:
    """The whole page, wired to ``runner`` (shared by every visitor: one job per app)."""
    with gr.Blocks(title="Finetune Studio") as demo:
        gr.Markdown("# Finetune Studio\nFine-tune a language model with LoRA, QLoRA or full training and watch it live.")
        with gr.Row():
            with gr.Column(scale=2):
                upload = gr.File(label="Training dataset (upload)", file_types=DATASET_TYPES, type="filepath")
                paths = gr.Textbox(label="...or dataset paths on the server", info="Comma-separated .json/.jsonl/.csv/.parquet/.txt paths.")
                eval_paths = gr.Textbox(label="Evaluation dataset paths (optional)", info="Comma-separated; evaluated every eval_steps.")
                widgets = _build_settings()
            with gr.Column(scale=3):
                with gr.Row():
                    start_btn = gr.Button("Start", variant="primary", elem_id="start")
                    stop_btn = gr.Button("Stop (save)", elem_id="stop")
                    cancel_btn = gr.Button("Cancel", variant="stop", elem_id="cancel")
                status = gr.Markdown("Loading status...", elem_id="status")
                loss_plot = gr.Plot(label="Loss")
                with gr.Row():
                    lr_plot = gr.Plot(label="Learning rate")
                    grad_plot = gr.Plot(label="Grad norm")
                with gr.Accordion("Dataset preview", open=True):
                    detected = gr.Markdown("Choose a dataset file or type its path.")
                    table = gr.Dataframe(value=pd.DataFrame({"row": [], "preview": []}), wrap=True, max_height=320,
                                         interactive=False)
                with gr.Accordion("Status (JSON)", open=False):
                    raw = gr.JSON(label="status")

        outputs = [status, raw, loss_plot, lr_plot, grad_plot]
        form = [widgets[name] for name in FORM_FIELDS]
        preview_inputs = [upload, paths, widgets["format_type"], widgets["custom_format_mapping"]]
        for trigger in (upload.change, paths.submit, paths.blur, widgets["format_type"].change):
            trigger(handlers.preview, preview_inputs, [detected, table], concurrency_limit=None, api_name=False)
        # concurrency_limit=None everywhere: the runner's lock guards the one job, so a second
        # Start is answered at once and any number of tabs can watch.
        start_btn.click(partial(handlers.start, runner), [upload, paths, eval_paths, *form], outputs,
                        concurrency_limit=None, api_name="start")
        stop_btn.click(partial(handlers.stop, runner), None, None, concurrency_limit=None, api_name="stop")
        cancel_btn.click(partial(handlers.cancel, runner), None, None, concurrency_limit=None, api_name="cancel")
        demo.load(partial(handlers.watch, runner), None, outputs, concurrency_limit=None, api_name="watch")
    return demo
