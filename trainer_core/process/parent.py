"""How the app and the worker processes it started end together: a worker ends with its app, and
the app ends through a normal interpreter exit (so its workers are asked to end and its
multiprocessing semaphores are unlinked) when it is told to stop."""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Any, Optional

_app_pid: Optional[int] = None  # set in a worker by ``remember_app``


def remember_app(pid: int) -> None:
    """In a worker process: the pid of the app that asked for it. A forked worker's parent is the
    forkserver (``process.context``), which lives on while any of its workers does, so the app is
    watched itself, not only the parent."""
    global _app_pid
    _app_pid = pid


def _app_exit_fd(pid: Optional[int]) -> Optional[int]:
    """A pidfd that becomes readable when process ``pid`` ends (Linux 5.3+), or None when there is
    nothing to watch this way. Raises ProcessLookupError when ``pid`` has already ended."""
    if pid is None or pid == os.getppid() or not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError as error:
        if isinstance(error, ProcessLookupError):
            raise
        return None  # pidfds not allowed here: the parent check alone


def exit_with_parent() -> None:
    """End this process within ~1 s of the app that started it dying (even by SIGKILL), so no
    orphan keeps training and holding memory: when the parent changes (a spawned worker's parent is
    the app) or, for a forked worker, when the app remembered by ``remember_app`` ends."""
    parent = os.getppid()
    try:
        app_ended = _app_exit_fd(_app_pid)
    except ProcessLookupError:
        os._exit(3)

    def watch() -> None:
        while os.getppid() == parent:
            if app_ended is None:
                time.sleep(1.0)
            elif select.select([app_ended], [], [], 1.0)[0]:
                break
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
