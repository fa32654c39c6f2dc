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

from trainer_core.access.admission import REFUSALS
from trainer_core.queue.store import QueueFull, QueueState
from ui.handlers import NOTICE_CLEAR, Context, form_request, watch
from ui.refusals import describe

log = logging.getLogger(__name__)
QUEUE_COLUMNS = ["position", "queue id", "state", "settings", "queued at", "note"]
EMPTY = "No jobs waiting. **Add to queue** takes the form as it is and starts it after the jobs before it."


def queue_table(ctx: Context) -> tuple[pd.DataFrame, str]:
    """(the table, a one-line summary). Waiting jobs first in run order; the note says why a job was
    refused or interrupted (as text: it may quote a user's path)."""
    entries = ctx.queue.entries() if ctx.queue is not None else []
    rows = [[e.position or "", e.queue_id, e.state.value, e.summary,
             datetime.fromtimestamp(e.created_at).strftime("%Y-%m-%d %H:%M:%S"), e.error or ""] for e in entries]
    waiting = sum(1 for e in entries if e.state == QueueState.waiting)
    line = EMPTY if not entries else f"{waiting} job{'s' * (waiting != 1)} waiting. Click a row to move or remove it."
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS), line


def add(ctx: Context, upload: Optional[str], paths_text: str, eval_upload: Optional[str], eval_text: str,
        *values: Any) -> tuple[pd.DataFrame, str, str]:
    """Queue the form's job: (table, summary, notice). The notice says the job's place (or why it
    was refused, naming the field by its on-screen label; a toast too)."""
    try:
        request = form_request(ctx, upload, paths_text, eval_upload, eval_text, values)
        entry = ctx.queue.add(request)
    except gr.Error as exc:
        return (*queue_table(ctx), _refusal(exc.message))
    except (QueueFull, *REFUSALS) as exc:
        return (*queue_table(ctx), _refusal(str(exc)))
    except Exception as exc:  # noqa: BLE001 - the page says what went wrong, never a traceback
        log.exception("queueing a job failed")
        return (*queue_table(ctx), _refusal(f"the job could not be queued: {exc}"))
    where = f"position {entry.position}" if entry.position else entry.state.value
    gr.Info(f"Queued as {entry.queue_id} ({where})", duration=4)
    return (*queue_table(ctx), NOTICE_CLEAR)


def _refusal(message: str) -> str:
    refusal = describe(message)
    gr.Warning(f"Not queued: {html.escape(refusal.text)}", duration=6)  # toasts render HTML
    return refusal.html("Not queued")


def on_select(event: gr.SelectData, table: pd.DataFrame) -> str:
    """The queue id of the clicked row."""
    row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
    try:
        return str(table.iloc[int(row)]["queue id"])
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
        return (*queue_table(ctx), _said("Choose a job in the table first (a job that has started is in the Runs tab)."),
                queue_id)
    return (*queue_table(ctx), _said(f"Removed {queue_id} from the queue."), "")


def _follow(ctx: Context):
    """The monitor's stream after an Add: the running job, then each queued job as it starts."""

    def follow():
        yield from watch(ctx.runner)

    return follow


def _said(text: str) -> str:
    return f'<div class="queue-note">{html.escape(text)}</div>'


def build(ctx: Context) -> dict[str, gr.components.Component]:
    """The queue block (under the form): summary, table, the chosen entry and its buttons."""
    with gr.Accordion("Job queue", open=True, elem_id="section-queue"):
        line = gr.Markdown(EMPTY, elem_id="queue-summary")
        table = gr.Dataframe(value=pd.DataFrame(columns=QUEUE_COLUMNS), interactive=False, max_height=260, wrap=True,
                             elem_id="queue-table")
        with gr.Row():
            chosen = gr.Textbox(label="Queue entry", placeholder="click a row", scale=3, elem_id="queue-id")
            up = gr.Button("Move up", size="sm", scale=1, elem_id="queue-up")
            down = gr.Button("Move down", size="sm", scale=1, elem_id="queue-down")
            drop = gr.Button("Remove", variant="stop", size="sm", scale=1, elem_id="queue-remove")
        said = gr.HTML("", elem_id="queue-notice")
    return {"line": line, "table": table, "chosen": chosen, "up": up, "down": down, "remove": drop, "said": said}


def wire(ctx: Context, block: dict, add_button: gr.Button, form_inputs: list, notice: gr.HTML, monitor: list,
         ticks: list) -> None:
    """The queue's events: Add (the form, as Start takes it; then the monitor follows the job that
    runs and the queued ones after it), row choice, move, remove, and a re-read of the table on page
    load and every timer tick (``ticks``)."""
    free = dict(concurrency_limit=None)
    table, line, said, chosen = block["table"], block["line"], block["said"], block["chosen"]
    added = add_button.click(lambda *a: add(ctx, *a), form_inputs, [table, line, notice], api_name="queue_add",
                             show_progress="hidden", concurrency_limit=2, concurrency_id="queue_add")
    added.then(_follow(ctx), None, monitor, api_name=False, show_progress="hidden", **free)
    table.select(on_select, table, chosen, api_name=False, **free)
    block["up"].click(lambda q: move(ctx, q, -1), chosen, [table, line, said], api_name="queue_up", **free)
    block["down"].click(lambda q: move(ctx, q, +1), chosen, [table, line, said], api_name="queue_down", **free)
    block["remove"].click(lambda q: remove(ctx, q), chosen, [table, line, said, chosen], api_name="queue_remove",
                          **free)
    for tick in ticks:
        tick(lambda: queue_table(ctx), None, [table, line], api_name=False, show_progress="hidden", **free)
