"""What the Export and Evaluate panels share: following a task until it ends, its status line, its
download links, and the model choices of one run."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from typing import Optional
from urllib.parse import quote

import gradio as gr

from trainer_core.serving.choices import list_choices
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import FINAL_TASK_PHASES, TaskPhase, TaskRecord

POLL_S = 0.5


def follow(tasks: TaskRunner, task_id: str, timeout_s: float = 24 * 3600) -> Iterator[TaskRecord]:
    """The task's record now and about every half second until it has ended (the last one is final)."""
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        record = tasks.get(task_id)
        if record is None:
            return
        key = (record.phase, round(record.progress, 3), record.message)
        if key != last:
            last = key
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
    text = f"{head}\n\n{html.escape(record.message)}"
    if record.error and record.error not in record.message:
        text += f"\n\n**Error:** {html.escape(record.error)}"
    return text


def refusal(message: str) -> str:
    """A refused action, shown in the panel (and as a toast) instead of an error badge on the outputs."""
    gr.Warning(message)
    return f"**Not started:** {html.escape(message)}"


def file_links(record: TaskRecord) -> str:
    """Markdown links to download each file the finished task listed (served by ``api.task_routes``)."""
    if not record.result or record.phase == TaskPhase.running:
        return ""
    names = [f["name"] for f in record.result.get("files", [])]
    if record.result.get("predictions_file"):
        names.append(record.result["predictions_file"])
    links = [f"[{html.escape(n)}](/api/train/tasks/{quote(record.task_id)}/files/{quote(n)})" for n in names]
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
