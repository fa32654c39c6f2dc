"""The page (Gradio Blocks): the Train tab (``ui.train_tab``), the Runs tab (``ui.runs_tab``), Chat
(``ui.chat_tab``), Search (``ui.search_tab``) and the Arena (``ui.arena_tab``), over one runner,
chat engine and task runner."""

from __future__ import annotations

from typing import Any

import gradio as gr

from trainer_core.runs.job import JobRunner
from trainer_core.serving.engine import ChatEngine
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRunner
from ui import arena_tab, runs_tab, search_tab
from ui.chat_tab import ChatTab
from ui.context import Context
from ui.quiet_errors import quiet_errors
from ui.storage_errors import refuse_full_disk
from ui.train_tab import TrainTab


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
    ``tasks``; no queue block without ``queue``, a ``JobQueue``; no Arena tab without ``arena``)."""
    from trainer_core.models.discovery import local_models

    ctx = Context(runner=runner, settings=settings, tasks=tasks, queue=queue)
    models = [(m.label, m.value) for m in local_models(settings)]
    with gr.Blocks(title="Finetune Studio") as demo:
        gr.Markdown(
            "# Finetune Studio\nFine-tune a language model with LoRA, QLoRA or full training and watch it live."
        )
        with gr.Tabs() as tabs:
            with gr.Tab("Train", id="train"):
                train = TrainTab.build(ctx, models)
            chat = ChatTab(engine, settings)
            search_tab.build(engine, settings)  # embedding models: a query ranked against passages
            preview_after = runs_tab.build(
                ctx, [train.paths, train.eval_paths, *train.form], train.monitor, train.notice, tabs, chat
            )
            if arena is not None:  # two models, one prompt, names hidden until the vote
                arena_tab.build(arena)
        train.wire(ctx, demo, preview_after)
    return refuse_full_disk(quiet_errors(demo), settings.data_dir)
