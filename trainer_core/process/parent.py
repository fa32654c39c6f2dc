"""How the app and the worker processes it started end together: a worker ends with its app, and
the app ends through a normal interpreter exit (so its workers are asked to end and its
multiprocessing semaphores are unlinked) when it is told to stop."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any


def exit_with_parent() -> None:
    """End this process within ~1 s of the app that spawned it dying (even by SIGKILL), so no
    orphan keeps training and holding memory."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _raise_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def exit_normally_on_sigterm() -> None:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread instead of killing the process.

    uvicorn shuts the server down on SIGTERM and then raises the signal again with the handler that
    was there before it started; with the default handler that kills the process before ``atexit``
    runs, so live workers are orphaned (``supervisor._let_workers_end`` never asks them to end) and
    the resource tracker reports every queue's and event's semaphore as leaked. Call it in the main
    thread before serving."""
    signal.signal(signal.SIGTERM, _raise_exit)


def ignore_interrupts() -> None:
    """In a worker process: a terminal's Ctrl-C reaches the whole process group, but the app
    decides when its workers end (it asks them at exit), so SIGINT is ignored here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
