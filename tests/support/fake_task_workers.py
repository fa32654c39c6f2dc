"""Light stand-ins for the export / evaluation workers (same signature and event protocol as
``TaskRunner`` targets), so the runner's locking, storage and clean-up are tested in seconds.
Module-level: spawn must import them."""

import os
import signal
import time
from pathlib import Path

from trainer_core.tasks.schemas import TaskEvent


def writing_task(request, context, events, stop):
    """Writes ``out.bin`` (request["bytes"] bytes), reports progress, then a result listing it
    (``passed`` from the request, default True)."""
    path = Path(context["output_dir"]) / "out.bin"
    path.write_bytes(b"x" * request.get("bytes", 10))
    for i in range(1, 4):
        events.put((TaskEvent.PROGRESS, {"fraction": i / 4, "message": f"part {i}"}))
        time.sleep(0.05)
    events.put(
        (
            TaskEvent.RESULT,
            {
                "files": [{"name": "out.bin", "size_bytes": path.stat().st_size}],
                "size_bytes": path.stat().st_size,
                "passed": request.get("passed", True),
                "seen_token": "token" in request,
            },
        )
    )


def slow_task(request, context, events, stop):
    """Writes a file, then reports progress every 50 ms for up to 60 s; returns on stop."""
    (Path(context["output_dir"]) / "partial.bin").write_bytes(b"x")
    for i in range(1200):
        if stop.is_set():
            return
        events.put((TaskEvent.PROGRESS, {"fraction": i / 1200, "message": "working"}))
        time.sleep(0.05)


def failing_task(request, context, events, stop):
    """Writes a file, then reports an error (as a full disk would)."""
    (Path(context["output_dir"]) / "half.bin").write_bytes(b"x")
    events.put((TaskEvent.ERROR, {"message": "No space left on device while writing half.bin", "kind": "internal"}))


def dying_task(request, context, events, stop):
    """Killed by SIGKILL mid-task, as the OOM killer would."""
    events.put((TaskEvent.PROGRESS, {"fraction": 0.1, "message": "loading"}))
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)
