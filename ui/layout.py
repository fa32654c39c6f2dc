"""The Gradio Blocks: a Train tab (model, dataset + preview, settings, Start / Stop / Cancel, status
and charts), the Runs tab (``ui.runs_tab``), Chat and Queue. Widgets come from the schema
(``ui.form``); behaviour lives in ``ui.handlers`` and the panels' own modules."""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr

from trainer_core.fieldmeta import group
from trainer_core.runs.job import JobRunner
from trainer_core.serving.engine import ChatEngine
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRunner
from ui import (
    arena_tab,
    compute_panel,
    config_panel,
    handlers,
    method_panel,
    placeholder_panel,
    preflight_panel,
    preview,
    queue_panel,
    runs_tab,
    vision_panel,
)
from ui.chat_tab import ChatTab
from ui.follow import tab_bound
from ui.form import FORM_FIELDS, make_widget
from ui.quiet_errors import quiet_errors
from ui.refusals import EVAL_UPLOAD_LABEL, MODEL_FIRST
from ui.storage_errors import refuse_full_disk
from ui.tables import fit_table
from ui.uploads import DATASET_TYPES, UPLOAD_LABEL

SECTIONS = (  # (schema group, accordion title)
    ("data", "Data options"),
    ("training", "Hyperparameters"),
    ("lora", "LoRA"),
    ("output", "Output"),
    ("distributed", "Devices and processes"),
)
HARDWARE_EVERY_S = 2.0  # the hardware panel's refresh period
FREE = dict(concurrency_limit=None)  # the runner's lock guards the one job; reads are cheap


def _build_model_group(models: list[tuple[str, str]]) -> dict[str, gr.components.Component]:
    """The model settings: the name, then training type and max length in a row, the less used ones
    (remote code, 4-bit, token) in a closed *Model options* (``#section-model``, which a refusal
    opens); ``models`` are the picker's local suggestions. Short, so the data is on the first screen."""
    names = [name for name in FORM_FIELDS if group(name) == "model"]
    widgets = {}
    widgets["model_name"] = make_widget("model_name", models)
    with gr.Row(equal_height=True):
        for name in (n for n in names if n in MODEL_FIRST and n != "model_name"):
            widgets[name] = make_widget(name)
    with gr.Accordion("Model options", open=False, elem_id="section-model"):
        for name in (n for n in names if n not in MODEL_FIRST):
            widgets[name] = make_widget(name)
    return widgets


def _build_sections() -> dict[str, gr.components.Component]:
    """The other settings in closed sections (ids ``section-<group>``, which a refusal opens)."""
    widgets = {}
    for section, title in SECTIONS:
        with gr.Accordion(title, open=False, elem_id=f"section-{section}"):
            for name in (n for n in FORM_FIELDS if group(n) == section):
                widgets[name] = make_widget(name)
    return widgets


def _monitor_column(ctx: handlers.Context) -> tuple[list, gr.HTML, gr.Markdown, dict]:
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


def _data_inputs() -> tuple[gr.File, gr.Textbox, gr.File, gr.Textbox, gr.Markdown, gr.Dataframe, dict]:
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
        "(Data options) to split them off the training rows.",
    )
    return upload, paths, eval_upload, eval_paths, detected, table, fill


def _config_block() -> dict[str, gr.components.Component]:
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


def _wire_config(ctx: handlers.Context, block: dict, file_inputs: list, form: list, after_load: Any) -> None:
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


def build_ui(
    runner: JobRunner,
    settings: Settings,
    engine: ChatEngine,
    tasks: TaskRunner | None = None,
    queue: Any = None,
    arena: Any = None,
) -> gr.Blocks:
    """The whole page, wired to ``runner``, ``engine`` and ``tasks`` (shared by every visitor: one
    job, one chat model and one export / evaluation per app; no Export / Evaluate panels without
    ``tasks``; no queue block without ``queue``, a ``JobQueue``; no Arena tab without ``arena``). The Train tab is two columns: the form (model, data and preview, closed sections)
    and the monitor, which stays in view (``ui.page_assets``)."""
    from trainer_core.models.discovery import local_models

    ctx = handlers.Context(runner=runner, settings=settings, tasks=tasks, queue=queue)
    models = [(m.label, m.value) for m in local_models(settings)]
    with gr.Blocks(title="Finetune Studio") as demo:
        gr.Markdown(
            "# Finetune Studio\nFine-tune a language model with LoRA, QLoRA or full training and watch it live."
        )
        with gr.Tabs() as tabs:
            with gr.Tab("Train", id="train"):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=5, elem_id="form-col"):
                        widgets = _build_model_group(models)  # model and data first: the first screen
                        upload, paths, eval_upload, eval_paths, detected, table, fill = _data_inputs()
                        widgets.update(method_panel.build(runner.store))
                        widgets.update(_build_sections())
                        config = _config_block()
                        queued = queue_panel.build(ctx) if queue is not None else None
                    monitor, notice, hardware, preflight = _monitor_column(ctx)
            form = [widgets[name] for name in FORM_FIELDS]
            chat = ChatTab(engine)
            preview_after = runs_tab.build(ctx, [paths, eval_paths, *form], monitor, notice, tabs, chat)
            if arena is not None:  # two models, one prompt, names hidden until the vote
                arena_tab.build(arena)

        preview_inputs = [
            upload,
            paths,
            widgets["format_type"],
            widgets["custom_format_mapping"],
            widgets["model_name"],
            widgets["max_seq_length"],
            widgets["training_method"],
        ]
        mapping, length = widgets["custom_format_mapping"], widgets["max_seq_length"]
        on_preview = partial(preview.preview, ctx)
        shown = [detected, table, *placeholder_panel.outputs(fill)]  # what a preview refresh sets
        for trigger in (
            upload.change,
            paths.submit,
            paths.blur,
            widgets["format_type"].change,
            mapping.submit,
            mapping.blur,
            widgets["model_name"].change,
            length.submit,
            length.blur,
            widgets["training_method"].change,
        ):
            trigger(on_preview, preview_inputs, shown, api_name=False, **FREE)
        for event in preview_after:
            event.then(on_preview, preview_inputs, shown, api_name=False, **FREE)
        fill["fill"].click(
            partial(placeholder_panel.fill, ctx),
            [upload, paths, fill["names"], *fill["fields"]],
            [upload, paths, fill["note"]],
            api_name="fill_placeholders",
            **FREE,
        )
        method_panel.wire(widgets)
        vision_panel.hide(widgets)
        compute_panel.hide(widgets)
        compute_panel.wire(widgets)
        vision_panel.wire(widgets, settings)
        demo.load(
            partial(method_panel.refresh_adapters, runner.store),
            None,
            widgets["adapter_name_or_path"],
            api_name=False,
            show_progress="hidden",
            **FREE,
        )
        file_inputs = [upload, paths, eval_upload, eval_paths]
        _wire_config(
            ctx,
            config,
            file_inputs,
            form,
            lambda event: event.then(on_preview, preview_inputs, shown, api_name=False, **FREE),
        )
        demo.load(
            config_panel.commands_handler(ctx),
            [*file_inputs, *form],
            [config["cli"], config["curl"]],
            api_name=False,
            show_progress="hidden",
            **FREE,
        )
        start_btn, stop_btn, cancel_btn = monitor[handlers.MONITOR_VIEWS :]
        start_btn.click(
            handlers.starting,
            None,
            [start_btn, preflight["panel"]],
            queue=False,
            show_progress="hidden",
            api_name=False,
        ).then(
            tab_bound(handlers.start, ctx),
            [upload, paths, eval_upload, eval_paths, *form, fill["names"], fill["as_is"]],
            [*monitor, notice],
            api_name="start",
            show_progress="hidden",
            **FREE,
        ).then(on_preview, preview_inputs, shown, api_name=False, **FREE)  # the model's tokenizer is here now
        start_btn.click(  # the folded report describes the settings started, not an earlier Check's
            partial(preflight_panel.recheck_at_start, ctx),
            [*file_inputs, *form],
            [preflight["panel"], preflight["report"], preflight["lengths"]],
            api_name=False,
            concurrency_limit=2,
            concurrency_id="preflight",
            show_progress="hidden",
        )
        preflight["button"].click(
            partial(preflight_panel.check, ctx),
            [*file_inputs, *form],
            [preflight["panel"], preflight["report"], preflight["lengths"], notice],
            api_name="check",
            concurrency_limit=2,
            concurrency_id="preflight",
        ).then(on_preview, preview_inputs, shown, api_name=False, **FREE)  # e.g. truncation, once the tokenizer is here
        stop_btn.click(partial(handlers.stop, ctx), None, None, api_name="stop", **FREE)
        cancel_btn.click(partial(handlers.cancel, ctx), None, None, api_name="cancel", **FREE)
        demo.load(tab_bound(handlers.watch, runner), None, monitor, api_name="watch", show_progress="hidden", **FREE)
        demo.load(
            partial(handlers.restore_form, ctx),
            None,
            [paths, eval_paths, *form],
            api_name=False,
            show_progress="hidden",
            **FREE,
        ).then(on_preview, preview_inputs, shown, api_name=False, **FREE)
        demo.load(handlers.prewarm(runner), None, None, api_name=False, show_progress="hidden", **FREE)
        timer = gr.Timer(HARDWARE_EVERY_S)
        for trigger in (demo.load, timer.tick):
            trigger(
                partial(handlers.hardware_line, ctx), None, hardware, api_name=False, show_progress="hidden", **FREE
            )
        if queued is not None:
            queue_panel.wire(
                ctx,
                queued,
                preflight["queue"],
                [*file_inputs, *form, fill["names"], fill["as_is"]],
                notice,
                monitor,
                preflight["waiting"],
                [demo.load, timer.tick],
            )
    return refuse_full_disk(quiet_errors(demo), settings.data_dir)
