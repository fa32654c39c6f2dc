"""The Server-Sent Events stream of training progress (``GET /api/train/progress``).

Format (WHATWG HTML, "Server-sent events"): a ``retry: 3000`` line first; then events with ``id:``
(the step), ``event:`` (progress | heartbeat | complete | error) and ``data:`` (a TrainingProgress
JSON). A client reconnecting with ``Last-Event-ID: N`` first gets every event after step N.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Optional

import anyio

from trainer_core.runs.job import JobRunner
from trainer_core.status import TrainingProgress, TrainingStatus
from trainer_core.vocabulary import Phase

RETRY_MS = 3000


def sse_event(kind: str, progress: TrainingProgress) -> str:
    """One event in wire format."""
    return f"id: {progress.step}\nevent: {kind}\ndata: {progress.model_dump_json()}\n\n"


def _current(runner: JobRunner, status: TrainingStatus) -> TrainingProgress:
    latest = runner.history.latest()
    return latest or TrainingProgress(job_id=status.job_id or "", step=0, total_steps=0)


async def progress_stream(runner: JobRunner, last_event_id: Optional[int], heartbeat_s: float) -> AsyncIterator[str]:
    """Replay what the client missed, then stream live until the job ends (closing with a
    ``complete`` or ``error`` event); a ``heartbeat`` after ``heartbeat_s`` seconds without news."""
    yield f"retry: {RETRY_MS}\n\n"
    index = runner.history.first_index_after(last_event_id) if last_event_id is not None else 0
    while True:
        version = runner.history.version
        status = runner.status()
        for event in runner.history.events_from(index):
            index += 1
            yield sse_event("progress", event)
        if not status.is_training_running:
            yield sse_event("error" if status.phase == Phase.error else "complete", _current(runner, status))
            return
        new_version = await anyio.to_thread.run_sync(runner.history.wait_for_change, version, heartbeat_s)
        if new_version == version:
            yield sse_event("heartbeat", _current(runner, status))
