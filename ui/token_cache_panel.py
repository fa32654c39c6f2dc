"""The tokenized-data cache on the page: a closed accordion under the form listing what is kept
(dataset files, model, split, rows, size, last used; ``data.token_cache.store``) with Refresh and
Delete. Deleting takes the key of the clicked row; anything else is refused in the notice, naming
the "Cache entry" box.

(No ``from __future__ import annotations``: Gradio finds the ``gr.SelectData`` parameter by its
evaluated annotation.)"""

import html
from datetime import datetime

import gradio as gr
import pandas as pd

from trainer_core.data.token_cache import store
from trainer_core.refusals import Refusal
from ui.context import Context
from ui.tables import fit_table

COLUMNS = ["dataset files", "model", "split", "rows", "size (MB)", "last used", "key"]
KEY_LABEL = "Cache entry"
EMPTY = "Nothing cached yet: Check or Start keep the tokenized data here, so the next Start on it skips tokenizing."


def cache_table(ctx: Context) -> tuple[pd.DataFrame, str]:
    """(the table, a one-line summary) of the cache's entries, most recently used first."""
    entries = store.entries(ctx.settings)
    rows = [
        [
            ", ".join(e.sources),
            e.model,
            e.split,
            e.rows,
            round(e.size_bytes / store.MIB, 1),
            datetime.fromtimestamp(e.last_used).strftime("%Y-%m-%d %H:%M"),
            e.key,
        ]
        for e in entries
    ]
    if not entries:
        return pd.DataFrame(columns=COLUMNS), EMPTY
    total = sum(e.size_bytes for e in entries) / store.MIB
    bound = ctx.settings.token_cache_mb
    return pd.DataFrame(rows, columns=COLUMNS), (
        f"{len(entries)} tokenized split{'s' * (len(entries) != 1)}, {total:.1f} of {bound} MB "
        "(STUDIO_TOKEN_CACHE_MB; the least recently used go first). Click a row to delete it."
    )


def on_select(event: gr.SelectData, table: pd.DataFrame) -> str:
    """The key of the clicked row."""
    row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
    try:
        return str(table.iloc[int(row)]["key"])
    except (IndexError, KeyError, ValueError, TypeError):
        return ""


def delete(ctx: Context, key: str) -> tuple[gr.update, gr.update, gr.update, gr.update]:
    """Delete the chosen entry: (table, summary, notice, cleared choice)."""
    key = (key or "").strip()
    try:
        entry = store.delete(key, ctx.settings)
    except Refusal as exc:
        said = f"{KEY_LABEL}: {'choose a row in the table first' if not key else str(exc).split(': ', 1)[-1]}"
        table, line = cache_table(ctx)
        return gr.update(value=table), gr.update(value=line), gr.update(value=_said(said)), gr.update()
    table, line = cache_table(ctx)
    message = f"Deleted the tokenized {entry.split} split of {', '.join(entry.sources)} ({entry.rows} rows)."
    return gr.update(value=table), gr.update(value=line), gr.update(value=_said(message)), gr.update(value="")


def refresh(ctx: Context) -> tuple[gr.update, gr.update]:
    """(table, summary), read now."""
    table, line = cache_table(ctx)
    return gr.update(value=table), gr.update(value=line)


def _said(text: str) -> str:
    return f'<div class="queue-note">{html.escape(text)}</div>'


def build(ctx: Context) -> dict[str, gr.components.Component]:
    """The accordion (closed): summary, table, the chosen key, Refresh and Delete, the notice."""
    with gr.Accordion("Tokenized data cache", open=False, elem_id="section-token-cache"):
        line = gr.Markdown(EMPTY, elem_id="token-cache-summary")
        table = fit_table(pd.DataFrame(columns=COLUMNS), "token-cache-table", 240)
        chosen = gr.Textbox(label=KEY_LABEL, placeholder="click a row", elem_id="token-cache-key")
        with gr.Row():
            again = gr.Button("Refresh", size="sm", min_width=60, elem_id="token-cache-refresh")
            drop = gr.Button("Delete", variant="stop", size="sm", min_width=60, elem_id="token-cache-delete")
        said = gr.HTML("", elem_id="token-cache-notice")
    return {"line": line, "table": table, "chosen": chosen, "refresh": again, "delete": drop, "said": said}


def wire(ctx: Context, block: dict, loads: list) -> None:
    """Row choice, Refresh, Delete, and a read of the table on each of ``loads`` (the page's load)."""
    free = dict(concurrency_limit=None)
    table, line, said, chosen = block["table"], block["line"], block["said"], block["chosen"]
    table.select(on_select, table, chosen, api_name=False, **free)
    block["refresh"].click(lambda: refresh(ctx), None, [table, line], api_name="token_cache_list", **free)
    block["delete"].click(
        lambda key: delete(ctx, key), chosen, [table, line, said, chosen], api_name="token_cache_delete", **free
    )
    for load in loads:
        load(lambda: refresh(ctx), None, [table, line], api_name=False, show_progress="hidden", **free)
