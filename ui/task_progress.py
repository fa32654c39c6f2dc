"""What the Export and Evaluate panels share: following a task until it ends, its status line, its
download links, and the model choices of one run."""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Iterator
from typing import Any, Optional
from urllib.parse import quote

import gradio as gr

from trainer_core.serving.choices import list_choices
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import FINAL_TASK_PHASES, TaskPhase, TaskRecord
from trainer_core.training.eta import ProgressPace
from ui.monitor_text import clock, progress_bar

POLL_S = 0.5
TICK_S = 2.0  # a running task's line is redrawn at least this often (its time left grows while it stalls)
_PACES: dict[str, ProgressPace] = {}  # task id -> its progress reports as the page saw them
_PACES_LOCK = threading.Lock()


def follow(tasks: TaskRunner, task_id: str, timeout_s: float = 24 * 3600) -> Iterator[TaskRecord]:
    """The task's record now, then each time it changes (checked about every half second) and at
    least every ``TICK_S`` while it runs, until it has ended (the last one is final)."""
    deadline, last, shown = time.monotonic() + timeout_s, None, 0.0
    while time.monotonic() < deadline:
        record = tasks.get(task_id)
        if record is None:
            return
        key = (record.phase, round(record.progress, 3), record.message)
        if key != last or time.monotonic() - shown >= TICK_S:
            last, shown = key, time.monotonic()
            yield record
        if record.phase in FINAL_TASK_PHASES:
            return
        time.sleep(POLL_S)


def status_line(record: Optional[TaskRecord]) -> str:
    """Markdown: the task, its phase and progress, its message or error."""
    if record is None:
        return ""
    head = f"**{record.kind.value} {record.task_id}** ({record.model}) · {record.phase.value}"
    if record.phase == TaskPhase.running:
        head += f" · {100 * record.progress:.0f}%"
        left = time_left(record)
        if left is not None:
            spread = f" ({clock(left[1])} – {clock(left[2])})" if left[2] > left[1] else ""
            head += f" · about {clock(left[0])} left{spread}"
    text = f"{head}\n\n{html.escape(record.message)}"
    if record.phase == TaskPhase.running:
        text += "\n\n" + progress_bar(record.progress)
    if record.error and record.error not in record.message:
        text += f"\n\n**Error:** {html.escape(record.error)}"
    return text


def time_left(record: TaskRecord, now: Optional[float] = None) -> Optional[tuple[float, float, float]]:
    """(seconds left, low, high) in a running task at its recent pace (``training.eta.ProgressPace``:
    the same rule as a training run's ETA, fed with each progress this page sees); None until it
    has reported progress twice, and for a task that is not running."""
    now = time.time() if now is None else now
    with _PACES_LOCK:
        if record.phase != TaskPhase.running:
            _PACES.pop(record.task_id, None)
            return None
        pace = _PACES.setdefault(record.task_id, ProgressPace(record.created_at))
        pace.update(now, record.progress)
        return pace.estimate(now)


TASK_CHECK_S = 2.0  # how often a panel's Cancel task button checks for a running task


def cancel_button(tasks: TaskRunner) -> dict[str, Any]:
    """The *Cancel task* button's state: enabled only while a task (export, evaluation, push, recipe) runs."""
    return gr.update(interactive=tasks.current() is not None)


def wire_cancel_buttons(tasks: TaskRunner, buttons: list[gr.Button]) -> None:
    """Keep ``buttons`` (the panels' *Cancel task*) enabled only while a task runs: checked on one
    ``TASK_CHECK_S`` timer for all of them (tasks start from the page, the API or another tab). (Paced
    by ``timers.pace`` like the page's other timers, the button was not enabled while an export ran:
    ``tests/e2e/test_newcomer.py``; kept at a steady pace until that is understood.)"""

    def states() -> tuple[dict[str, Any], ...]:
        return tuple(cancel_button(tasks) for _ in buttons)

    gr.Timer(TASK_CHECK_S).tick(states, None, buttons, api_name=False, show_progress="hidden", queue=False)


def refusal(message: str) -> str:
    """A refused action, shown in the panel (and as a toast) instead of an error badge on the outputs."""
    gr.Warning(message)
    return f"**Not started:** {html.escape(message)}"


def file_links(record: TaskRecord) -> str:
    """Markdown links to download each file the finished task listed (served by ``api.task_routes``),
    led by one link to all of them as a zip when there are several."""
    names = record.file_names()
    if not names:
        return ""
    base = f"/api/train/tasks/{quote(record.task_id)}"
    links = [f"[{html.escape(n)}]({base}/files/{quote(n)})" for n in names]
    if len(names) > 1:
        links.insert(0, f"**[All {len(names)} files (zip)]({base}/zip)**")
    return " · ".join(links)


def run_choices(tasks: TaskRunner, job_id: Optional[str], with_base: bool = False) -> list[tuple[str, str]]:
    """(label, id) of run ``job_id``'s final weights and checkpoints (and ``base`` first when asked)."""
    job_id = (job_id or "").strip()
    choices = list_choices(tasks.run_store, tasks.settings)
    picked = [(c.label, c.id) for c in choices if job_id and c.job_id == job_id]
    if with_base:
        picked.insert(0, (choices[0].label, choices[0].id))
    return picked


def size_text(size_bytes: int) -> str:
    """Bytes as KB / MB / GB (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"
