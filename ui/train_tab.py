"""The Train tab: the form (model, data and its preview, the method, closed sections of settings,
the settings file and command), and beside it the monitor (Start, Check, Stop, Cancel, the refusal
notice, the pre-flight report, the status line and charts, the hardware panel), kept in view while
the form scrolls (``ui.page_assets``). Widgets come from the schema (``ui.form``); what the events
do lives in ``ui.train_handlers`` and the panels' own modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Optional

import gradio as gr

from ui import (
    audio_panel,
    compute_panel,
    config_panel,
    embedding_panel,
    method_panel,
    placeholder_panel,
    preflight_panel,
    preview,
    queue_panel,
    recipe_panel,
    token_cache_panel,
    train_widgets,
    vision_panel,
)
from ui import train_handlers as handlers
from ui.context import Context
from ui.follow import tab_bound
from ui.form import FORM_FIELDS
from ui.timers import IDLE_EVERY_S, pace

HARDWARE_EVERY_S = 2.0  # the hardware panel's refresh period
PREVIEW_FIELDS = (
    "format_type",
    "custom_format_mapping",
    "model_name",
    "max_seq_length",
    "training_method",
    "is_dataset_audio",
    "max_audio_seconds",
    "is_embedding",
    "embedding_columns",
    "embedding_loss",
    "speaker_column",
)
FREE = dict(concurrency_limit=None)  # the runner's lock guards the one job; reads are cheap


@dataclass
class TrainTab:
    """The Train tab's components (``build``), which other tabs read and write (the Runs tab's
    Resume and Load fill the form; the monitor follows the job) and ``wire`` connects."""

    widgets: dict[str, gr.components.Component]
    upload: gr.File
    paths: gr.Textbox
    eval_upload: gr.File
    eval_paths: gr.Textbox
    detected: gr.Markdown
    table: gr.Dataframe
    fill: dict
    config: dict
    queued: Optional[Any]
    monitor: list
    notice: gr.HTML
    hardware: gr.Markdown
    preflight: dict
    blocks: dict
    cache: dict
    recipes: Optional[dict]

    @property
    def form(self) -> list:
        """The form's widgets in ``FORM_FIELDS`` order."""
        return [self.widgets[name] for name in FORM_FIELDS]

    @classmethod
    def build(cls, ctx: Context, models: list[tuple[str, str]]) -> TrainTab:
        """Place the tab's components (inside an open ``gr.Tab``); ``models`` are the model picker's
        local suggestions."""
        with gr.Row(equal_height=False):
            with gr.Column(scale=5, elem_id="form-col"):
                widgets = train_widgets.model_group(models)  # model and data first: the first screen
                upload, paths, eval_upload, eval_paths, detected, table, fill = train_widgets.data_inputs()
                widgets.update(method_panel.build(ctx.runner.store))
                blocks: dict = {}
                widgets.update(train_widgets.sections(blocks))
                config = train_widgets.config_block()
                queued = queue_panel.build(ctx) if ctx.queue is not None else None
                cache = token_cache_panel.build(ctx)
                recipes = recipe_panel.build(ctx) if ctx.tasks is not None else None  # a run is a task
            monitor, notice, hardware, preflight = train_widgets.monitor_column(ctx)
        return cls(
            widgets, upload, paths, eval_upload, eval_paths, detected, table, fill, config, queued, monitor, notice,
            hardware, preflight, blocks, cache, recipes,
        )  # fmt: skip

    @property
    def files(self) -> list:
        """The four data inputs: training upload and paths, evaluation upload and paths."""
        return [self.upload, self.paths, self.eval_upload, self.eval_paths]

    def wire(self, ctx: Context, demo: gr.Blocks, preview_after: list) -> None:
        """Connect the tab's events (inside ``demo``, in this order: Gradio numbers them so);
        ``preview_after`` are other tabs' events after which the dataset preview is refreshed (the
        Runs tab's Resume and Load)."""
        refresh = self._wire_preview(ctx, preview_after)
        self._wire_panels(ctx, demo)
        self._wire_settings(ctx, demo, refresh)
        self._wire_buttons(ctx, refresh)
        timer = self._wire_monitor(ctx, demo, refresh)
        token_cache_panel.wire(ctx, self.cache, [demo.load])
        if self.queued is not None:
            queue_panel.wire(
                ctx,
                self.queued,
                self.preflight["queue"],
                [*self.files, *self.form, self.fill["names"], self.fill["as_is"]],
                self.notice,
                self.monitor,
                self.preflight["waiting"],
                [demo.load, timer.tick],
            )
        if self.recipes is not None:
            used = {"upload": self.upload, "paths": self.paths, **self.widgets}
            recipe_panel.wire(ctx, self.recipes, used, [demo.load], refresh)

    def _wire_preview(self, ctx: Context, preview_after: list) -> Callable[[Any], Any]:
        """The dataset preview on each change that alters it, and the placeholders' Fill button;
        returns ``refresh(event)``, which refreshes the preview after ``event``."""
        widgets = self.widgets
        inputs = [self.upload, self.paths, *(widgets[n] for n in PREVIEW_FIELDS)]
        shown = [self.detected, self.table, *placeholder_panel.outputs(self.fill)]  # what a refresh sets
        on_preview = partial(preview.preview, ctx)
        mapping, length = widgets["custom_format_mapping"], widgets["max_seq_length"]
        columns = widgets["embedding_columns"]
        # One event for every trigger, always_last: the page runs one preview at a time and then the
        # latest, so an older preview (a blur's, with the old values) never lands after a newer one.
        gr.on(
            [
                self.upload.change,
                self.paths.submit,
                self.paths.blur,
                widgets["format_type"].change,
                mapping.submit,
                mapping.blur,
                widgets["model_name"].change,
                length.submit,
                length.blur,
                widgets["training_method"].change,
                widgets["is_dataset_audio"].change,
                widgets["max_audio_seconds"].submit,
                widgets["max_audio_seconds"].blur,
                widgets["is_embedding"].change,
                columns.submit,
                columns.blur,
                widgets["embedding_loss"].change,
                widgets["speaker_column"].submit,
                widgets["speaker_column"].blur,
            ],
            on_preview,
            inputs,
            shown,
            api_name=False,
            trigger_mode="always_last",
            **FREE,
        )

        def refresh(event: Any) -> Any:
            return event.then(on_preview, inputs, shown, api_name=False, **FREE)

        for event in preview_after:
            refresh(event)
        self.fill["fill"].click(
            partial(placeholder_panel.fill, ctx),
            [self.upload, self.paths, self.fill["names"], *self.fill["fields"]],
            [self.upload, self.paths, self.fill["note"]],
            api_name="fill_placeholders",
            **FREE,
        )
        return refresh

    def _wire_panels(self, ctx: Context, demo: gr.Blocks) -> None:
        """The sections that show, hide or fill themselves: method, images, embedding, audio, compute, adapters."""
        method_panel.wire(self.widgets)
        vision_panel.hide(self.widgets)
        compute_panel.hide(self.widgets)
        compute_panel.wire(self.widgets)
        vision_panel.wire(self.widgets, ctx.settings)
        embedding_panel.wire(self.widgets, self.blocks[embedding_panel.SECTION], ctx.settings)
        audio_panel.wire(self.widgets, self.blocks[audio_panel.SECTION], ctx.settings)
        demo.load(
            partial(method_panel.refresh_adapters, ctx.runner.store),
            None,
            self.widgets["adapter_name_or_path"],
            api_name=False,
            show_progress="hidden",
            **FREE,
        )

    def _wire_settings(self, ctx: Context, demo: gr.Blocks, refresh: Callable[[Any], Any]) -> None:
        """The settings file (save, load) and the command preview."""
        train_widgets.wire_config(ctx, self.config, self.files, self.form, refresh)
        demo.load(
            config_panel.commands_handler(ctx),
            [*self.files, *self.form],
            [self.config["cli"], self.config["curl"]],
            api_name=False,
            show_progress="hidden",
            **FREE,
        )

    def _wire_buttons(self, ctx: Context, refresh: Callable[[Any], Any]) -> None:
        """Start (and its recheck of the folded report), Check, Stop and Cancel."""
        start_btn, stop_btn, cancel_btn = self.monitor[handlers.MONITOR_VIEWS :]
        preflight, inputs = self.preflight, [*self.files, *self.form]
        started = start_btn.click(
            handlers.starting,
            None,
            [start_btn, preflight["panel"]],
            queue=False,
            show_progress="hidden",
            api_name=False,
        ).then(
            tab_bound(handlers.start, ctx),
            [*inputs, self.fill["names"], self.fill["as_is"]],
            [*self.monitor, self.notice],
            api_name="start",
            show_progress="hidden",
            **FREE,
        )
        refresh(started)  # the model's tokenizer is here now
        start_btn.click(  # the folded report describes the settings started, not an earlier Check's
            partial(preflight_panel.recheck_at_start, ctx),
            inputs,
            [preflight["panel"], preflight["report"], preflight["lengths"]],
            api_name=False,
            concurrency_limit=2,
            concurrency_id="preflight",
            show_progress="hidden",
        )
        checked = preflight["button"].click(
            partial(preflight_panel.check, ctx),
            inputs,
            [preflight["panel"], preflight["report"], preflight["lengths"], self.notice],
            api_name="check",
            concurrency_limit=2,
            concurrency_id="preflight",
        )
        refresh(checked)  # e.g. truncation, once the tokenizer is here
        stop_btn.click(partial(handlers.stop, ctx), None, None, api_name="stop", **FREE)
        cancel_btn.click(partial(handlers.cancel, ctx), None, None, api_name="cancel", **FREE)

    def _wire_monitor(self, ctx: Context, demo: gr.Blocks, refresh: Callable[[Any], Any]) -> gr.Timer:
        """At page load: follow the job, show its settings in the form, warm a worker; the hardware
        panel every ``HARDWARE_EVERY_S`` s while a job runs or waits, every ``timers.IDLE_EVERY_S`` while
        none does (``timers.pace``). Returns that timer (the job queue's table follows it too)."""
        demo.load(
            tab_bound(handlers.watch, ctx.runner), None, self.monitor, api_name="watch", show_progress="hidden", **FREE
        )
        restored = demo.load(
            partial(handlers.restore_form, ctx),
            None,
            [*self.files, *self.form],
            api_name=False,
            show_progress="hidden",
            **FREE,
        )
        refresh(restored)
        demo.load(handlers.prewarm(ctx.runner), None, None, api_name=False, show_progress="hidden", **FREE)
        timer = gr.Timer(IDLE_EVERY_S)

        def hardware() -> tuple[str, Any]:  # the line, and the timer's pace: fast while a job runs or waits
            running = ctx.runner.status(with_history=False).is_training_running
            return handlers.hardware_line(ctx), pace(running or queue_panel.has_entries(ctx), HARDWARE_EVERY_S)

        for trigger in (demo.load, timer.tick):
            trigger(
                hardware,
                None,
                [self.hardware, timer],
                api_name=False,
                show_progress="hidden",
                **FREE,
            )
        return timer
