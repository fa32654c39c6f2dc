"""The recipe panel's model work: a preview of the first rows (made here, nothing written) with the
full run's time and token estimate, and the run itself as a task (``trainer_core.recipes.task``:
the queue's machine lock, progress, Stop that keeps what was made, Resume), followed the way the
Export panel follows an export. The key typed in goes to the writer only: never into a message,
a log line or the page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Optional

import gradio as gr
import pandas as pd
from pydantic import SecretStr

from trainer_core.recipes.preview import PREVIEW_RECORDS
from trainer_core.recipes.run import RecipeResult, full_run_estimate, run_recipe
from trainer_core.recipes.task import start_recipe_task, task_key
from trainer_core.refusals import Refusal
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase
from ui.monitor_text import clock
from ui.recipe_form import PageFields, compose, notice, on_page
from ui.task_progress import follow, status_line

CELL_CHARS = 200
PREVIEW_COLUMNS = ["record", "kept", "why dropped"]


def secret(typed: Optional[str]) -> Optional[SecretStr]:
    """The key typed in (None when blank)."""
    return SecretStr(typed.strip()) if (typed or "").strip() else None


def scrubbed(text: str, key: Optional[SecretStr]) -> str:
    """``text`` without the key (a server may echo what it was sent)."""
    value = key.get_secret_value() if key is not None else ""
    return text.replace(value, "***") if value else text


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def preview_table(result: RecipeResult) -> pd.DataFrame:
    """One row per record made: kept or dropped and why, then each column's value (the recipe's
    columns, then the seed's)."""
    records = sorted([*result.kept, *result.dropped], key=lambda r: r.index)
    names = list(dict.fromkeys(name for r in records for name in r.row))
    seeds = set(result.seeds.columns)
    names = [n for n in names if n not in seeds] + [n for n in names if n in seeds]  # the model's columns first
    rows = [
        [r.index + 1, "no" if r.reason else "yes", f"{r.reason}: {r.detail}" if r.reason else "", *(
            _cell(r.row.get(n, "")) for n in names
        )]
        for r in records
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=[*PREVIEW_COLUMNS, *names])


def estimate_text(estimate: dict[str, Any], result: RecipeResult) -> str:
    """The preview's counts and the full run's estimate."""
    counts = result.counts
    dropped = ", ".join(f"{k} {v}" for k, v in counts["dropped"].items() if v) or "none"
    return (
        f"Preview: {counts['kept']} of {counts['made']} rows kept (dropped: {dropped}) in {result.seconds:.1f} s. "
        f"**Full run:** {estimate['records']} records, about {clock(estimate['seconds'])} and "
        f"{estimate['tokens']:,} tokens at this concurrency."
    )


def preview(
    tasks: TaskRunner, text: str, fields: PageFields, typed_key: Optional[str]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Make the first ``PREVIEW_RECORDS`` records (refused while training or a task runs, as the
    API's preview is): (table, estimate, notice)."""
    key, settings = secret(typed_key), tasks.settings
    try:
        recipe = compose(text, fields, settings)
        sent = task_key(recipe, key, settings)
        tasks.check_idle()
        result = run_recipe(recipe, settings, sent, preview=PREVIEW_RECORDS)
    except Refusal as exc:
        said = scrubbed(str(on_page(exc)), key)
        return gr.update(), gr.update(value=""), gr.update(value=notice(said, exc.code))
    estimate = full_run_estimate(recipe, result)
    return (
        gr.update(value=preview_table(result)),
        gr.update(value=estimate_text(estimate, result)),
        gr.update(value=""),
    )


def run(
    tasks: TaskRunner, text: str, fields: PageFields, typed_key: Optional[str], resume: Optional[str] = None
) -> Iterator[tuple[str, Optional[str], str]]:
    """Start the run (or resume the stopped one ``resume``, a result folder's name) and follow it:
    (status line, task id, notice) at each change."""
    key = secret(typed_key)
    try:
        recipe_text = "" if resume else _as_run(text, fields, tasks.settings)
        record = start_recipe_task(tasks, recipe_text, api_key=key, resume=resume)
    except Refusal as exc:
        yield "", None, notice(scrubbed(str(on_page(exc)), key), exc.code)
        return
    for current in follow(tasks, record.task_id):
        yield scrubbed(progress_text(current), key), record.task_id, ""


def _as_run(text: str, fields: PageFields, settings: Settings) -> str:
    """The YAML the task runs: the editor's recipe with the page's fields laid over it."""
    from trainer_core.recipes.schema import recipe_yaml

    return recipe_yaml(compose(text, fields, settings))


def progress_text(record: Any) -> str:
    """The task's status line (its message says rows done / total, and kept of made at the end),
    then the drops by gate once it has ended."""
    line = status_line(record)
    result = record.result or {}
    if record.phase in (TaskPhase.completed, TaskPhase.cancelled) and result.get("counts"):
        dropped = ", ".join(f"{k} {v}" for k, v in result["counts"].get("dropped", {}).items() if v) or "none"
        line += f"\n\n**Dropped by gate:** {dropped}."
        if result.get("stopped"):
            line += " Stopped: *Resume* (with this result chosen) goes on from the rows made."
    return line


def stop(tasks: TaskRunner) -> str:
    """Stop the running recipe task (what was made is kept): a notice."""
    current = tasks.current()
    if current is None or current.kind != TaskKind.recipe or not tasks.cancel(current.task_id):
        return notice("No recipe run is running.", "not_running")
    return notice(f"Stopping {current.task_id}: the rows made so far are kept; Resume goes on from them.")
