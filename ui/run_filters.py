"""The Runs tab's list: its filters (name or job id, status, dataset) as the page sends them,
checked, and its paging: the table shows the newest ``RUNS_PAGE`` runs, *Show more* adds a page
(counting the rows the table has, so a Refresh, a filter or a Save starts again from the newest
page), and a line says how many of how many are shown. Every value may come from a raw queue call
rather than the page, so each is checked here; a bad one is a ``gr.Error``."""

from __future__ import annotations

from typing import Any, Optional

import gradio as gr
import pandas as pd

from trainer_core.runs.listing import MAX_PAGE_SIZE, PAGE_SIZE
from trainer_core.runs.store import STATUS_WORDS
from ui.context import Context
from ui.refused import Refused

ALL_STATUSES = "all"
STATUS_CHOICES = [(ALL_STATUSES, ALL_STATUSES)] + [(word.replace("_", " "), word) for word in STATUS_WORDS]
FILTER_MAX_CHARS = 200
RUNS_PAGE = PAGE_SIZE  # runs the table shows at first, and adds on each "Show more"
MAX_SHOWN = MAX_PAGE_SIZE  # runs the table shows at most (as GET /api/train/runs' largest limit)


def _filter_text(value: Any, what: str) -> str:
    """A filter box's text (at most ``FILTER_MAX_CHARS`` characters; ``gr.Error`` for anything else)."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > FILTER_MAX_CHARS:
        raise Refused(f"The {what} filter must be text of at most {FILTER_MAX_CHARS} characters.")
    return value.strip()


def list_filters(name: Optional[str], status: Optional[str], dataset: Optional[str]) -> dict[str, Optional[str]]:
    """The filters as ``RunStore.list_runs`` takes them (name or job id contains ``name``, status
    word is ``status`` unless "all", a dataset path or Hub id contains ``dataset``); ``gr.Error``
    for an unknown status or an over-long filter."""
    status = status or ALL_STATUSES
    if status != ALL_STATUSES and status not in STATUS_WORDS:
        raise Refused(f"Unknown status filter; choose one of: {', '.join(STATUS_WORDS)}.")
    return {
        "name": _filter_text(name, "name"),
        "status": None if status == ALL_STATUSES else status,
        "dataset": _filter_text(dataset, "dataset"),
    }


def shown_count(value: Any) -> int:
    """How many runs the table shows: a whole number from 1 to ``MAX_SHOWN`` (``gr.Error`` otherwise;
    None: ``RUNS_PAGE``)."""
    if value is None:
        return RUNS_PAGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise Refused(f"The number of runs shown must be a whole number from 1 to {MAX_SHOWN}.")
    if not 1 <= value <= MAX_SHOWN:
        raise Refused(f"The number of runs shown must be a whole number from 1 to {MAX_SHOWN}.")
    return int(value)


def rows_shown(table: Any) -> int:
    """How many runs ``table`` (the Runs table's value as the page sends it back: a DataFrame, or
    Gradio's ``{"data": rows}``; None: empty) shows; ``gr.Error`` for anything else."""
    if table is None:
        return 0
    if isinstance(table, pd.DataFrame):
        return len(table)
    if isinstance(table, dict) and isinstance(table.get("data"), list):
        return len(table["data"])
    raise Refused("The runs table could not be read: refresh the list.")


def more_rows(table: Any) -> int:
    """*Show more*: how many runs the table shows next: ``RUNS_PAGE`` more than ``table`` (at most ``MAX_SHOWN``)."""
    return max(1, min(rows_shown(table) + RUNS_PAGE, MAX_SHOWN))


def count_line(ctx: Context, *shown: Any) -> tuple[str, dict]:
    """(the line under the table: how many runs it shows of how many match, the *Show more*
    button's update: shown only while more match) for ``shown``: the three filters, then the table
    as the page has it."""
    *texts, table = shown
    filters, rows = list_filters(*texts), rows_shown(table)
    total = ctx.runner.store.runs_page(limit=0, **filters)[1]
    kind = "runs" if not any(filters.values()) else "matching runs"
    if total == 0:
        line = "No runs yet." if kind == "runs" else "No runs match the filters."
    elif total <= rows:
        line = f"All {total:,} {kind}."
    else:
        line = f"The newest {rows:,} of {total:,} {kind}."
    more = min(RUNS_PAGE, MAX_SHOWN - rows, max(0, total - rows))
    return line, gr.update(value=f"Show {more} more", visible=more > 0)
