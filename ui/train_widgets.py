"""The Train tab's components, placed: the model group, the data inputs and preview, the closed
sections of settings, the settings file and command block, and the monitor column (``#monitor-col``,
sticky); and the settings block's events. ``ui.train_tab`` puts them together and wires the rest."""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr

from trainer_core.fieldmeta import group
from trainer_core.request.sections import SECTIONS
from ui import config_panel, embedding_panel, placeholder_panel, preflight_panel, queue_panel
from ui import train_handlers as handlers
from ui.context import Context
from ui.form import FORM_FIELDS, make_widget
from ui.refusals import MODEL_FIRST
from ui.tables import fit_table
from ui.uploads import DATASET_TYPES, EVAL_UPLOAD_LABEL, UPLOAD_LABEL

FREE = dict(concurrency_limit=None)  # the runner's lock guards the one job; reads are cheap


OWN_BUILDERS = ("model", "method")  # sections placed by model_group and method_panel.build


def model_group(models: list[tuple[str, str]]) -> dict[str, gr.components.Component]:
    """The model settings: the name, then training type and max length in a row, the less used ones
    (remote code, 4-bit, token) in a closed *Model options* (``#section-model``, which a refusal
    opens); ``models`` are the picker's local suggestions. Short, so the data is on the first screen."""
    names = [name for name in FORM_FIELDS if group(name) == "model"]
    widgets = {}
    widgets["model_name"] = make_widget("model_name", models)
    with gr.Row(equal_height=True):
        for name in (n for n in names if n in MODEL_FIRST and n != "model_name"):
            widgets[name] = make_widget(name)
    with gr.Accordion(SECTIONS["model"].form, open=False, elem_id="section-model"):
        for name in (n for n in names if n not in MODEL_FIRST):
            widgets[name] = make_widget(name)
    return widgets


def sections(blocks: dict[str, gr.Accordion]) -> dict[str, gr.components.Component]:
    """The other settings in closed sections (ids ``section-<group>``, which a refusal opens), in
    ``SECTIONS``' order under its titles; each section's accordion goes into ``blocks`` (by its key),
    *Embedding options* and *Audio options* hidden at first (shown for an embedder / an audio model)."""
    widgets = {}
    for section in (key for key in SECTIONS if key not in OWN_BUILDERS):
        visible = section not in (embedding_panel.SECTION, "audio")  # audio: shown by the audio panel (issue 49)
        with gr.Accordion(SECTIONS[section].form, open=False, visible=visible, elem_id=f"section-{section}") as block:
            for name in (n for n in FORM_FIELDS if group(n) == section):
                widgets[name] = make_widget(name)
        blocks[section] = block
    return widgets


def monitor_column(ctx: Context) -> tuple[list, gr.HTML, gr.Markdown, dict]:
    """The right column, kept in view while the form scrolls (``#monitor-col`` is sticky): the
    buttons (Start, Add to queue, Check, Stop, Cancel), the refusal notice, the pre-flight report, the status
    line, the three charts, the hardware panel and the raw status. Returns (monitor outputs in
    ``handlers.render``'s order, notice, hardware, the pre-flight components)."""
    with gr.Column(scale=6, elem_id="monitor-col"):
        with gr.Row():
            start_btn = gr.Button("Start", variant="primary", elem_id="start", min_width=80)
            queue_btn = gr.Button(
                queue_panel.ADD_LABEL, elem_id="queue-add", min_width=80, visible=ctx.queue is not None
            )
            check_btn = gr.Button("Check", elem_id="check", min_width=80)
            stop_btn = gr.Button("Stop (save)", elem_id="stop", interactive=False, min_width=80)
            cancel_btn = gr.Button("Cancel", variant="stop", elem_id="cancel", interactive=False, min_width=80)
        notice = gr.HTML(handlers.NOTICE_CLEAR, elem_id="start-notice")
        waiting = gr.Markdown("", elem_id="queue-waiting", visible=ctx.queue is not None)
        with gr.Accordion(preflight_panel.TITLE, open=False, visible=False, elem_id="preflight") as checked:
            report = gr.HTML("", elem_id="preflight-report")
            lengths = gr.Plot(show_label=False, elem_id="preflight-lengths")
        status = gr.Markdown("Loading status...", elem_id="status")
        loss_plot = gr.Plot(show_label=False, elem_id="loss-plot")
        with gr.Row():
            lr_plot = gr.Plot(show_label=False, elem_id="lr-plot")
            grad_plot = gr.Plot(show_label=False, elem_id="grad-plot")
        reward_plot = gr.Plot(show_label=False, elem_id="reward-plot", visible=False)  # DPO / ORPO / KTO / GRPO runs
        rollout_plot = gr.Plot(show_label=False, elem_id="rollout-plot", visible=False)  # GRPO runs
        samples = gr.HTML("", elem_id="grpo-samples", visible=False)  # GRPO runs
        hardware = gr.Markdown("", elem_id="hardware")
        with gr.Accordion("Status (JSON)", open=False):
            raw = gr.JSON(label="status")
    preflight = {
        "button": check_btn,
        "panel": checked,
        "report": report,
        "lengths": lengths,
        "queue": queue_btn,
        "waiting": waiting,
    }
    return (
        [
            status,
            raw,
            loss_plot,
            lr_plot,
            grad_plot,
            reward_plot,
            rollout_plot,
            samples,
            start_btn,
            stop_btn,
            cancel_btn,
        ],
        notice,
        hardware,
        preflight,
    )


def data_inputs() -> tuple[gr.File, gr.Textbox, gr.File, gr.Textbox, gr.Markdown, gr.Dataframe, dict]:
    """Training and evaluation files (upload or server paths), the dataset preview and the
    placeholder fields under it (``placeholder_panel``)."""
    upload = gr.File(label=UPLOAD_LABEL, file_types=DATASET_TYPES, type="filepath", elem_id="train-upload")
    paths = gr.Textbox(
        label="...or dataset paths on the server",
        elem_id="train-paths",
        info="Comma-separated paths of .json/.jsonl/.csv/.parquet/.txt files (also .gz / .zst "
        "compressed), or of a folder of them.",
    )
    with gr.Accordion("Dataset preview", open=True, elem_id="preview"):
        detected = gr.Markdown("Choose a dataset file or type its path.", elem_id="preview-summary")
        table = fit_table(handlers.EMPTY_PREVIEW, "preview-table", 420, datatype=["number", "markdown"])
    fill = placeholder_panel.build()
    eval_upload = gr.File(label=EVAL_UPLOAD_LABEL, file_types=DATASET_TYPES, type="filepath", elem_id="eval-upload")
    eval_paths = gr.Textbox(
        label="...or evaluation dataset paths on the server (optional)",
        elem_id="eval-paths",
        info="Comma-separated; evaluated every Eval steps. Or set the validation fraction "
        f"({SECTIONS['data'].form}) to split them off the training rows.",
    )
    return upload, paths, eval_upload, eval_paths, detected, table, fill


def config_block() -> dict[str, gr.components.Component]:
    """Under the form: save / load the settings as YAML and the equivalent command and API call."""
    with gr.Accordion("Settings file and command", open=True, elem_id="section-config"):
        with gr.Row():
            save_btn = gr.Button("Save settings (YAML)", size="sm", elem_id="settings-save")
            load_btn = gr.UploadButton(
                config_panel.LOAD_LABEL,
                file_types=[".yaml", ".yml"],
                type="filepath",
                size="sm",
                elem_id="settings-load",
            )
        saved = gr.File(label="Saved settings", visible=False, interactive=False, elem_id="settings-file")
        notice = gr.HTML("", elem_id="settings-notice")
        cli = gr.Code(
            label="Command line (settings that differ from the defaults)",
            language="shell",
            interactive=False,
            elem_id="command-cli",
        )
        curl = gr.Code(label="HTTP API (curl)", language="shell", interactive=False, elem_id="command-curl")
    return {"save": save_btn, "load": load_btn, "saved": saved, "notice": notice, "cli": cli, "curl": curl}


def wire_config(ctx: Context, block: dict, file_inputs: list, form: list, after_load: Any) -> None:
    """The config block's events: save, load (then ``after_load``: the preview), and the command
    preview on every change of the form."""
    inputs = [*file_inputs, *form]
    block["save"].click(
        partial(config_panel.save, ctx), inputs, [block["saved"], block["notice"]], api_name="settings_save", **FREE
    )
    loaded = block["load"].upload(
        partial(config_panel.load, ctx), block["load"], [*inputs, block["notice"]], api_name="settings_load", **FREE
    )
    after_load(loaded)
    triggers = [w.change for w in inputs]
    gr.on(
        triggers,
        config_panel.commands_handler(ctx),
        inputs,
        [block["cli"], block["curl"]],
        api_name="command_preview",
        trigger_mode="always_last",
        show_progress="hidden",
        **FREE,
    )
