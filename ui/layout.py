"""The Gradio Blocks: a Train tab (model, dataset + preview, settings, Start / Stop / Cancel, status
and charts) and a Runs tab (history). Widgets come from the schema (``ui.form``); behaviour lives in
``ui.handlers`` and ``ui.run_handlers``."""

from __future__ import annotations

from functools import partial

import gradio as gr
import pandas as pd

from trainer_core.fieldmeta import group
from trainer_core.runs.job import JobRunner
from trainer_core.serving.engine import ChatEngine
from trainer_core.settings import Settings
from trainer_core.serving.share import ShareLinks
from trainer_core.tasks.runner import TaskRunner
from ui import evaluate_panel, export_panel, handlers, run_handlers, share_handlers
from ui.chat_tab import ChatTab
from ui.form import FORM_FIELDS, make_widget

SECTIONS = (  # (schema group, accordion title)
    ("data", "Data options"),
    ("training", "Hyperparameters"),
    ("lora", "LoRA"),
    ("output", "Output"),
)
DATASET_TYPES = [".json", ".jsonl", ".csv", ".parquet", ".txt"]
FREE = dict(concurrency_limit=None)  # the runner's lock guards the one job; reads are cheap


def _build_settings() -> dict[str, gr.components.Component]:
    widgets = {}
    with gr.Group():
        for name in (n for n in FORM_FIELDS if group(n) == "model"):
            widgets[name] = make_widget(name)
    for section, title in SECTIONS:
        with gr.Accordion(title, open=False):
            for name in (n for n in FORM_FIELDS if group(n) == section):
                widgets[name] = make_widget(name)
    return widgets


def _monitor() -> list[gr.components.Component]:
    """Status line, raw status JSON and the three charts (in ``handlers.render``'s order)."""
    status = gr.Markdown("Loading status...", elem_id="status")
    loss_plot = gr.Plot(label="Loss")
    with gr.Row():
        lr_plot = gr.Plot(label="Learning rate")
        grad_plot = gr.Plot(label="Grad norm")
    with gr.Accordion("Status (JSON)", open=False):
        raw = gr.JSON(label="status")
    return [status, raw, loss_plot, lr_plot, grad_plot]


def _runs_tab(ctx: handlers.Context, train_inputs: list, monitor: list, tabs: gr.Tabs, chat: ChatTab) -> gr.Tab:
    with gr.Tab("Runs", id="runs") as tab:
        with gr.Row():
            selected = gr.Textbox(label="Run", placeholder="click a run in the table, or paste its job id", scale=4)
            refresh = gr.Button("Refresh", size="sm", scale=1)
        table = gr.Dataframe(value=pd.DataFrame(columns=run_handlers.RUN_COLUMNS), interactive=False, max_height=300)
        summary = gr.Markdown("Click a run to see its charts and settings.")
        with gr.Row():
            load_btn = gr.Button("Load settings into the form")
            resume_btn = gr.Button("Resume", variant="primary")
            chat_btn = gr.Button("Chat with this run", elem_id="chat-with-run")
            delete_btn = gr.Button("Delete...", variant="stop")
            confirm_btn = gr.Button("Yes, delete this run and its files", variant="stop", visible=False)
        with gr.Accordion("Share link", open=False):
            with gr.Row():
                hours = gr.Number(label="Expires in hours", info="Empty or 0: never (revoke it to end it).", minimum=0,
                                  maximum=24 * 366, value=None, scale=2)
                share_btn = gr.Button("Create share link", scale=1)
            share_info = gr.Markdown("A link opens a chat page for this run's model only, and works as an OpenAI base_url.")
            links = gr.Dataframe(value=pd.DataFrame(columns=share_handlers.LINK_COLUMNS), interactive=False, max_height=200)
            with gr.Row():
                link_id = gr.Textbox(label="Link id to revoke", scale=3)
                revoke_btn = gr.Button("Revoke", variant="stop", scale=1)
        if ctx.tasks is not None:
            export_panel.build(ctx.tasks, selected)
            evaluate_panel.build(ctx.tasks, selected)
        loss, lr, grad = gr.Plot(label="Loss"), gr.Plot(label="Learning rate"), gr.Plot(label="Grad norm")
        settings = gr.JSON(label="Settings")
    tab.select(partial(run_handlers.runs_table, ctx), None, table, api_name=False, **FREE)
    refresh.click(partial(run_handlers.runs_table, ctx), None, table, api_name="runs", **FREE)
    table.select(run_handlers.on_select(ctx), table, selected, api_name=False, **FREE)
    selected.change(partial(run_handlers.show_run, ctx), selected, [summary, settings, loss, lr, grad],
                    api_name="show_run", **FREE)
    load_btn.click(partial(run_handlers.load_settings, ctx), selected, train_inputs, api_name="load_settings",
                   **FREE).then(lambda: gr.Tabs(selected="train"), None, tabs, api_name=False)
    resume_btn.click(lambda: gr.Tabs(selected="train"), None, tabs, api_name=False).then(
        partial(run_handlers.resume, ctx), selected, monitor, api_name="resume", **FREE)
    chat_btn.click(partial(run_handlers.chat_with, ctx, chat.engine), selected, chat.model, api_name=False, **FREE).then(
        lambda: gr.Tabs(selected="chat"), None, tabs, api_name=False)
    share_store = ShareLinks(ctx.settings)
    on_create, on_revoke = share_handlers.handlers(share_store, chat.engine)
    selected.change(partial(share_handlers.links_table, share_store), selected, links, api_name=False, **FREE)
    share_btn.click(on_create, [selected, hours], [share_info, links], api_name="share_create", **FREE)
    revoke_btn.click(on_revoke, [selected, link_id], [share_info, links], api_name="share_revoke", **FREE)
    delete_btn.click(lambda: gr.update(visible=True), None, confirm_btn, api_name=False)
    confirm_btn.click(partial(run_handlers.delete, ctx), selected, [table, confirm_btn], api_name="delete_run", **FREE)
    return tab


def build_ui(runner: JobRunner, settings: Settings, engine: ChatEngine, tasks: TaskRunner | None = None) -> gr.Blocks:
    """The whole page, wired to ``runner``, ``engine`` and ``tasks`` (shared by every visitor: one
    job, one chat model and one export / evaluation per app; no Export / Evaluate panels without
    ``tasks``)."""
    ctx = handlers.Context(runner=runner, settings=settings, tasks=tasks)
    with gr.Blocks(title="Finetune Studio") as demo:
        gr.Markdown("# Finetune Studio\nFine-tune a language model with LoRA, QLoRA or full training and watch it live.")
        with gr.Tabs() as tabs:
            with gr.Tab("Train", id="train"):
                with gr.Row():
                    with gr.Column(scale=2):
                        upload = gr.File(label="Training dataset (upload)", file_types=DATASET_TYPES, type="filepath")
                        paths = gr.Textbox(label="...or dataset paths on the server",
                                           info="Comma-separated .json/.jsonl/.csv/.parquet/.txt paths.")
                        eval_upload = gr.File(label=handlers.EVAL_UPLOAD_LABEL, file_types=DATASET_TYPES,
                                              type="filepath", elem_id="eval-upload")
                        eval_paths = gr.Textbox(label="...or evaluation dataset paths on the server (optional)",
                                                info="Comma-separated; evaluated every eval_steps. Or set Val size "
                                                     "(Data options) to split them off the training rows.")
                        widgets = _build_settings()
                    with gr.Column(scale=3):
                        with gr.Row():
                            start_btn = gr.Button("Start", variant="primary", elem_id="start")
                            stop_btn = gr.Button("Stop (save)", elem_id="stop")
                            cancel_btn = gr.Button("Cancel", variant="stop", elem_id="cancel")
                        monitor = _monitor()
                        with gr.Accordion("Dataset preview", open=True):
                            detected = gr.Markdown("Choose a dataset file or type its path.")
                            table = gr.Dataframe(value=handlers.EMPTY_PREVIEW, wrap=True, max_height=320,
                                                 interactive=False, column_widths=["60px", "100%"])
            form = [widgets[name] for name in FORM_FIELDS]
            chat = ChatTab(engine)
            _runs_tab(ctx, [paths, eval_paths, *form], monitor, tabs, chat)

        preview_inputs = [upload, paths, widgets["format_type"], widgets["custom_format_mapping"]]
        mapping = widgets["custom_format_mapping"]
        for trigger in (upload.change, paths.submit, paths.blur, widgets["format_type"].change, mapping.submit, mapping.blur):
            trigger(partial(handlers.preview, ctx), preview_inputs, [detected, table], api_name=False, **FREE)
        start_btn.click(partial(handlers.start, ctx), [upload, paths, eval_upload, eval_paths, *form], monitor,
                        api_name="start", **FREE)
        stop_btn.click(partial(handlers.stop, ctx), None, None, api_name="stop", **FREE)
        cancel_btn.click(partial(handlers.cancel, ctx), None, None, api_name="cancel", **FREE)
        demo.load(partial(handlers.watch, runner), None, monitor, api_name="watch", **FREE)
        demo.load(handlers.prewarm(runner), None, None, api_name=False, show_progress="hidden", **FREE)
    return demo
