"""The Runs tab's list: its filters (name or job id, status, dataset) as the page sends them,
checked, and its paging (the newest ``RUNS_PAGE`` runs, *Show more* adds a page; a line says how
many of how many are shown). Every value may come from a raw queue call rather than the page, so
each is checked here; a bad one is a ``gr.Error``."""

from __future__ import annotations

from typing import Any, Optional

import gradio as gr

from trainer_core.runs.store import STATUS_WORDS
from ui.context import Context
from ui.refused import Refused

ALL_STATUSES = "all"
STATUS_CHOICES = [(ALL_STATUSES, ALL_STATUSES)] + [(word.replace("_", " "), word) for word in STATUS_WORDS]
FILTER_MAX_CHARS = 200
RUNS_PAGE = 50  # runs the table shows at first, and adds on each "Show more"
MAX_SHOWN = 10_000  # runs the table shows at most (as GET /api/train/runs' largest limit)


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


def show_more(shown: Any) -> int:
    """*Show more*: ``RUNS_PAGE`` more runs than ``shown`` (at most ``MAX_SHOWN``)."""
    return min(shown_count(shown) + RUNS_PAGE, MAX_SHOWN)


def listing(
    name: Optional[str] = "", status: Optional[str] = ALL_STATUSES, dataset: Optional[str] = "", shown: Any = RUNS_PAGE
) -> tuple[dict[str, Optional[str]], int]:
    """(``list_filters``, ``shown_count``) of the list's inputs: the three filters, then the count shown."""
    return list_filters(name, status, dataset), shown_count(shown)


def count_line(ctx: Context, *listed: Any) -> tuple[str, dict]:
    """(the line under the table: how many runs it shows of how many match, the *Show more*
    button's update: shown only while more match) for the list's inputs ``listed`` (``listing``)."""
    filters, limit = listing(*listed)
    total = ctx.runner.store.runs_page(limit=0, **filters)[1]
    kind = "runs" if not any(filters.values()) else "matching runs"
    if total == 0:
        line = "No runs yet." if kind == "runs" else "No runs match the filters."
    elif total <= limit:
        line = f"All {total:,} {kind}."
    else:
        line = f"The newest {limit:,} of {total:,} {kind}."
    more = min(RUNS_PAGE, MAX_SHOWN - limit, max(0, total - limit))
    return line, gr.update(value=f"Show {more} more", visible=more > 0)
