"""The Runs tab: what was trained, and what can be done with it (``build``). Behaviour lives in
``ui.run_handlers``, ``ui.share_handlers``, ``ui.compare_panel`` and the export / evaluate panels."""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr
import pandas as pd

from trainer_core.serving.share import MAX_EXPIRES_IN_HOURS, MIN_EXPIRES_IN_HOURS, ShareLinks
from ui import compare_panel, evaluate_panel, export_panel, run_filters, run_handlers, share_handlers, task_progress
from ui.chat_tab import ChatTab
from ui.context import Context
from ui.follow import tab_bound
from ui.tables import fit_table
from ui.timers import pace

RUN_VIEW_EVERY_S = 3.0  # how often the Runs tab checks whether the selected run moved on
FREE = dict(concurrency_limit=None)  # reads are cheap; the runner's lock guards the one job


def build(ctx: Context, train_inputs: list, monitor: list, notice: gr.HTML, tabs: gr.Tabs, chat: ChatTab) -> list:
    """The Runs tab: the history table with its filters, the selected run's summary, charts and
    buttons (load, resume, chat, download, delete), share links, the Export and Evaluate panels
    (with ``ctx.tasks``) and the comparison. ``train_inputs`` are the Train tab's form widgets,
    ``monitor`` / ``notice`` its status outputs, ``tabs`` the page's tabs. Returns the events whose
    end should refresh the dataset preview."""
    with gr.Tab("Runs", id="runs") as tab:
        filters = compare_panel.build_filters()
        with gr.Row():
            selected = gr.Textbox(
                label="Run", placeholder="click a run in the table, or paste its job id", scale=4, elem_id="run-id"
            )
            refresh = gr.Button("↻ Refresh the list", size="sm", scale=1, elem_id="runs-refresh")
        table = fit_table(pd.DataFrame(columns=run_handlers.RUN_COLUMNS), "runs-table", 300)
        with gr.Row(elem_id="runs-paging"):
            count = gr.Markdown("", elem_id="runs-count")
            more = gr.Button(
                f"Show {run_filters.RUNS_PAGE} more", size="sm", visible=False, elem_id="runs-more", scale=0
            )
        summary = gr.Markdown(run_handlers.NO_RUN, elem_id="run-summary")
        shown = gr.Textbox(visible=False, elem_id="run-view-key")  # run_handlers.view_key of what is shown
        follow_timer = gr.Timer(RUN_VIEW_EVERY_S, active=False)  # started by a live run's selection
        picker = compare_panel.build_compare(ctx)
        compare_panel.build_label_editor(ctx, selected, filters, table, picker)
        with gr.Row(elem_id="runs-actions"):
            load_btn = gr.Button("Load into form", elem_id="load-settings", interactive=False)
            resume_btn = gr.Button("Resume", variant="primary", elem_id="resume", interactive=False)
            chat_btn = gr.Button("Chat with this run", elem_id="chat-with-run", interactive=False)
            download_btn = gr.Button("Download run (zip)", elem_id="download-run")
            delete_btn = gr.Button("Delete...", variant="stop", elem_id="delete", interactive=False)
        with gr.Row(visible=False) as confirm_row:
            confirm_btn = gr.Button("Yes, delete this run and its files", variant="stop", elem_id="delete-confirm")
            keep_btn = gr.Button("Cancel (keep it)", elem_id="delete-cancel")
        runs_notice = gr.HTML("", elem_id="runs-notice")
        bundle = gr.File(label="run.json and final weights", visible=False, interactive=False, elem_id="run-bundle")
        with gr.Accordion("Share link", open=False):
            with gr.Row():
                hours = gr.Number(
                    label="Expires in hours",
                    info=f"Empty or 0: never (revoke it to end it); else at least one minute ({MIN_EXPIRES_IN_HOURS:.4g}).",
                    minimum=0,
                    maximum=MAX_EXPIRES_IN_HOURS,
                    value=None,
                    scale=2,
                )
                share_btn = gr.Button("Create share link", scale=1)
            share_info = gr.Markdown(
                "A link opens a chat page for this run's model only, and works as an OpenAI base_url."
            )
            links = fit_table(pd.DataFrame(columns=share_handlers.LINK_COLUMNS), "share-links", 200)
            with gr.Row():
                link_id = gr.Textbox(label="Link id to revoke", scale=3)
                revoke_btn = gr.Button("Revoke", variant="stop", scale=1)
        if ctx.tasks is not None:
            cancels = [export_panel.build(ctx.tasks, selected, shown), evaluate_panel.build(ctx.tasks, selected, shown)]
            task_progress.wire_cancel_buttons(ctx.tasks, cancels)
        loss = gr.Plot(show_label=False, elem_id="run-loss-plot")
        with gr.Row():
            lr, grad = (
                gr.Plot(show_label=False, elem_id="run-lr-plot"),
                gr.Plot(show_label=False, elem_id="run-grad-plot"),
            )
        rewards = gr.Plot(show_label=False, elem_id="run-reward-plot", visible=False)
        settings = gr.JSON(label="Settings")
    run_buttons = [load_btn, resume_btn, chat_btn, delete_btn]
    resumed_form = resume_btn.click(
        partial(run_handlers.form_for_resume, ctx), selected, train_inputs, api_name=False, **FREE
    )
    tab.select(partial(run_handlers.runs_table, ctx), filters, table, api_name=False, **FREE)
    tab.select(partial(compare_panel.choices, ctx), picker, picker, api_name=False, **FREE)
    compare_panel.wire_filters(ctx, filters, table)
    refreshed = refresh.click(partial(run_handlers.runs_table, ctx), filters, table, api_name="runs", **FREE)
    more.click(partial(run_handlers.more_runs, ctx), [*filters, table], table, api_name=False, **FREE)
    for changed in (table.change, refreshed.then):  # a refresh may leave the table's rows as they were
        changed(partial(run_filters.count_line, ctx), [*filters, table], [count, more], api_name=False, **FREE)
    refreshed.then(
        partial(run_handlers.show_run, ctx),
        selected,
        [summary, settings, loss, lr, grad, rewards, *run_buttons],
        api_name=False,
        **FREE,
    )  # the selected run's view is current too
    refreshed.then(partial(compare_panel.choices, ctx), picker, picker, api_name=False, **FREE)
    table.select(run_handlers.on_select(ctx), table, selected, api_name=False, **FREE)
    selected.change(
        partial(run_handlers.show_run, ctx),
        selected,
        [summary, settings, loss, lr, grad, rewards, *run_buttons],
        api_name="show_run",
        **FREE,
    )
    selected.change(  # another run: the last one's notice and download are not about it
        lambda: ("", gr.update(value=None, visible=False)), None, [runs_notice, bundle], api_name=False, queue=False
    )

    # the selected run's view follows the run: redrawn when its phase, step or checkpoints change
    def follow(job_id: Any) -> tuple[str, Any]:  # the view's key, and the timer: ticking only while the run is live
        key = run_handlers.view_key(ctx, job_id)
        return key, pace(run_handlers.is_live(ctx, job_id), RUN_VIEW_EVERY_S, None)

    for trigger in (selected.change, follow_timer.tick, tab.select):  # the tab shown again: a run resumed since
        trigger(follow, selected, [shown, follow_timer], api_name=False, show_progress="hidden", **FREE)
    shown.change(
        partial(run_handlers.show_run, ctx),
        selected,
        [summary, settings, loss, lr, grad, rewards, *run_buttons],
        api_name=False,
        show_progress="hidden",
        **FREE,
    )
    loaded = load_btn.click(
        partial(run_handlers.load_settings, ctx), selected, train_inputs, api_name="load_settings", **FREE
    )
    loaded.then(lambda: gr.update(selected="train"), None, tabs, api_name=False)
    resume_btn.click(
        tab_bound(run_handlers.resume, ctx),
        selected,
        [*monitor, notice, runs_notice, tabs],
        api_name="resume",
        show_progress="hidden",
        **FREE,
    )
    chat_btn.click(
        partial(run_handlers.chat_with, ctx, chat.engine), selected, [chat.model, chat.seen], api_name=False, **FREE
    ).then(lambda: gr.update(selected="chat"), None, tabs, api_name=False)
    share_store = ShareLinks(ctx.settings)
    on_create, on_revoke = share_handlers.handlers(share_store, chat.engine)
    selected.change(partial(share_handlers.links_table, share_store), selected, links, api_name=False, **FREE)
    share_btn.click(on_create, [selected, hours], [share_info, links], api_name="share_create", **FREE)
    revoke_btn.click(on_revoke, [selected, link_id], [share_info, links], api_name="share_revoke", **FREE)
    download_btn.click(
        partial(run_handlers.download, ctx), selected, [bundle, runs_notice], api_name="download_run", **FREE
    )
    delete_btn.click(lambda: gr.update(visible=True), None, confirm_row, api_name=False)
    keep_btn.click(lambda: gr.update(visible=False), None, confirm_row, api_name=False)
    confirm_btn.click(
        partial(run_handlers.delete, ctx),
        selected,
        [table, confirm_row, selected, runs_notice],
        api_name="delete_run",
        **FREE,
    )
    return [loaded, resumed_form]
