"""The job queue on the page: "Add to queue" beside Start, and under the form a table of the queued
jobs (position, settings summary, state) with Move up / Move down / Remove.

The queue is the app's one ``JobQueue`` (shared by every visitor, like the job). Adding checks the
form exactly as Start does and says a refusal in the notice beside the buttons, naming the field
by its label. The table is re-read on the page's timer, so a job leaving the queue shows within a
few seconds in every tab.

(No ``from __future__ import annotations``: Gradio finds the ``gr.SelectData`` parameter by its
evaluated annotation.)"""

import html
import logging
from datetime import datetime
from typing import Any, Optional

import gradio as gr
import pandas as pd

from trainer_core.process.disk_full import storage_refusal
from trainer_core.queue.store import QueueState
from trainer_core.refusals import Refusal
from ui.context import Context
from ui.follow import tab_bound
from ui.form import FORM_FIELDS
from ui.placeholder_panel import gate as placeholder_gate
from ui.refusals import describe
from ui.tables import fit_table
from ui.train_handlers import NOTICE_CLEAR, form_request, watch

log = logging.getLogger(__name__)
QUEUE_COLUMNS = ["#", "state", "settings", "note", "queued", "queue id"]
ADD_LABEL = "Add to queue"
EMPTY = "No jobs waiting. **Add to queue** takes the form as it is and starts it after the jobs before it."


def _entries(ctx: Context) -> list:
    """The queue's entries (``JobQueue.entries``; none without a queue)."""
    return ctx.queue.entries() if ctx.queue is not None else []


def has_entries(ctx: Context) -> bool:
    """Whether a job waits in the queue (the page's timer keeps its fast pace then)."""
    return any(e.state == QueueState.waiting for e in _entries(ctx))


def queue_table(ctx: Context, entries: Optional[list] = None) -> tuple[pd.DataFrame, str]:
    """(the table, a one-line summary) of ``entries`` (None: read now). Waiting jobs first in run
    order; the note says why a job was refused or interrupted (as text: it may quote a user's path)."""
    entries = _entries(ctx) if entries is None else entries
    rows = [
        [
            e.position or "",
            e.state.value,
            e.summary,
            e.error or "",
            datetime.fromtimestamp(e.created_at).strftime("%H:%M:%S"),
            e.queue_id,
        ]
        for e in entries
    ]
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS), _count_line(entries)


def _count_line(entries: list) -> str:
    """E.g. "2 jobs waiting, 1 refused (see its note). Click a row to move or remove it."."""
    if not entries:
        return EMPTY
    waiting = sum(1 for e in entries if e.state == QueueState.waiting)
    others = {
        state: sum(1 for e in entries if e.state == state) for state in (QueueState.refused, QueueState.interrupted)
    }
    parts = [f"{waiting} job{'s' * (waiting != 1)} waiting"]
    parts += [f"{count} {state.value}" for state, count in others.items() if count]
    note = " (see the note)" if any(others.values()) else ""
    return f"{', '.join(parts)}{note}. Click a row to move or remove it."


def monitor_line(ctx: Context, entries: Optional[list] = None) -> str:
    """Beside the buttons: how many of ``entries`` (None: read now) wait in the queue (the table is under the form)."""
    waiting = sum(1 for e in (_entries(ctx) if entries is None else entries) if e.state == QueueState.waiting)
    return f"{waiting} job{'s' * (waiting != 1)} waiting in the queue (Job queue, under the form)" if waiting else ""


def refresh(ctx: Context) -> tuple[pd.DataFrame, str, str]:
    """(table, summary, the monitor's line), for the page's load and timer: the entries read once."""
    entries = _entries(ctx)
    return (*queue_table(ctx, entries), monitor_line(ctx, entries))


def add(
    ctx: Context, upload: Optional[str], paths_text: str, eval_upload: Optional[str], eval_text: str, *values: Any
) -> tuple[pd.DataFrame, str, str]:
    """Queue the form's job: (table, summary, notice). The notice says the job's place (or why it
    was refused, naming the field by its on-screen label; a toast too). After the form's values may
    come the page's placeholder names and its as-is box, checked as Start checks them."""
    values, placeholders = values[: len(FORM_FIELDS)], values[len(FORM_FIELDS) :]
    try:
        if placeholders:
            placeholder_gate(*placeholders)
        request = form_request(ctx, upload, paths_text, eval_upload, eval_text, values)
        entry = ctx.queue.add(request)
    except (gr.Error, Refusal) as exc:  # a setting, path or file refused, or the queue full
        return (*queue_table(ctx), _refusal(exc))
    except Exception as exc:  # noqa: BLE001 - the page says what went wrong, never a traceback
        full = storage_refusal(exc, ctx.settings.data_dir)  # a full disk: nothing was queued
        if full is None:
            log.exception("queueing a job failed")
        return (*queue_table(ctx), _refusal(full or f"the job could not be queued: {exc}"))
    where = f"position {entry.position}" if entry.position else entry.state.value
    gr.Info(f"Queued as {entry.queue_id} ({where})", duration=4)
    return (*queue_table(ctx), NOTICE_CLEAR)


def _refusal(refusal: BaseException | str) -> str:
    """The notice (and a toast) of a refused add (``ui.refusals.describe``)."""
    refusal = describe(refusal)
    gr.Warning(f"Not queued: {html.escape(refusal.text)}", duration=6)  # toasts render HTML
    return refusal.html("Not queued")


def on_select(event: gr.SelectData, table: pd.DataFrame) -> str:
    """The queue id of the clicked row."""
    row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
    try:
        return str(table.iloc[int(row)]["queue id"])  # the id column, whichever cell was clicked
    except (IndexError, KeyError, ValueError, TypeError):
        return ""


def move(ctx: Context, queue_id: str, by: int) -> tuple[pd.DataFrame, str, str]:
    """Move the chosen waiting job ``by`` places (-1: earlier); (table, summary, message)."""
    queue_id = (queue_id or "").strip()
    entry = ctx.queue.store.get(queue_id) if queue_id and ctx.queue is not None else None
    if entry is None or entry.state != QueueState.waiting:
        return (*queue_table(ctx), _said("Choose a waiting job in the table first."))
    moved = ctx.queue.move(queue_id, max(1, entry.position + by))
    message = f"{queue_id} is now at position {moved.position}." if moved else f"{queue_id} is no longer waiting."
    return (*queue_table(ctx), _said(message))


def remove(ctx: Context, queue_id: str) -> tuple[pd.DataFrame, str, str, str]:
    """Remove the chosen job from the queue; (table, summary, message, cleared choice)."""
    queue_id = (queue_id or "").strip()
    if not queue_id or ctx.queue is None or not ctx.queue.remove(queue_id):
        return (
            *queue_table(ctx),
            _said("Choose a job in the table first (a job that has started is in the Runs tab)."),
            queue_id,
        )
    return (*queue_table(ctx), _said(f"Removed {queue_id} from the queue."), "")


def _said(text: str) -> str:
    return f'<div class="queue-note">{html.escape(text)}</div>'


def build(ctx: Context) -> dict[str, gr.components.Component]:
    """The queue block (under the form): summary, table, the chosen entry and its buttons."""
    with gr.Accordion("Job queue", open=True, elem_id="section-queue"):
        line = gr.Markdown(EMPTY, elem_id="queue-summary")
        table = fit_table(pd.DataFrame(columns=QUEUE_COLUMNS), "queue-table", 260)
        chosen = gr.Textbox(label="Queue entry", placeholder="click a row", elem_id="queue-id")
        with gr.Row():
            up = gr.Button("Move up", size="sm", min_width=60, elem_id="queue-up")
            down = gr.Button("Move down", size="sm", min_width=60, elem_id="queue-down")
            drop = gr.Button("Remove", variant="stop", size="sm", min_width=60, elem_id="queue-remove")
        said = gr.HTML("", elem_id="queue-notice")
    return {"line": line, "table": table, "chosen": chosen, "up": up, "down": down, "remove": drop, "said": said}


def wire(
    ctx: Context,
    block: dict,
    add_button: gr.Button,
    form_inputs: list,
    notice: gr.HTML,
    monitor: list,
    waiting: gr.Markdown,
    ticks: list,
) -> None:
    """The queue's events: Add (the button says "Adding…" and is disabled until the checks answer, so
    no click is lost or doubled; then the monitor follows the job that runs and the queued ones after
    it), row choice, move, remove, and a re-read of the table and of the monitor's ``waiting`` line on
    page load and every timer tick (``ticks``)."""
    free = dict(concurrency_limit=None)
    table, line, said, chosen = block["table"], block["line"], block["said"], block["chosen"]
    busy = add_button.click(
        lambda: gr.update(value="Adding…", interactive=False),
        None,
        add_button,
        queue=False,
        show_progress="hidden",
        api_name=False,
    )
    added = busy.then(
        lambda *a: add(ctx, *a),
        form_inputs,
        [table, line, notice],
        api_name="queue_add",
        show_progress="hidden",
        concurrency_limit=2,
        concurrency_id="queue_add",
    )
    added.then(
        lambda: (gr.update(value=ADD_LABEL, interactive=True), monitor_line(ctx)),
        None,
        [add_button, waiting],
        queue=False,
        show_progress="hidden",
        api_name=False,
    )
    added.then(tab_bound(watch, ctx.runner), None, monitor, api_name=False, show_progress="hidden", **free)
    table.select(on_select, table, chosen, api_name=False, **free)
    block["up"].click(lambda q: move(ctx, q, -1), chosen, [table, line, said], api_name="queue_up", **free)
    block["down"].click(lambda q: move(ctx, q, +1), chosen, [table, line, said], api_name="queue_down", **free)
    block["remove"].click(
        lambda q: remove(ctx, q), chosen, [table, line, said, chosen], api_name="queue_remove", **free
    )
    for tick in ticks:
        tick(lambda: refresh(ctx), None, [table, line, waiting], api_name=False, show_progress="hidden", **free)
