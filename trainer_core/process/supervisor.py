"""One worker process and the pipes to it, shared by training and inference.

A worker gets an event queue out (``(kind, payload)`` tuples), a stop ``Event`` in and, for a
long-lived worker, a command queue in; its target is called as ``target(*args, [commands,] events,
stop)``. The supervising thread reads events with ``next_event``, which notices a dead worker, hands
out every event it sent before dying, and then raises ``WorkerExited`` with the reason
(``exit_reason.KillEvidence``: out of memory only on evidence).

No "leaked semaphore" warnings at exit: every named semaphore a process creates is registered with
multiprocessing's resource tracker and must be unlinked by that process before it ends. A worker
killed before it ends leaks its own, and at interpreter exit multiprocessing SIGTERMs daemon
children straight away, even a worker that has sent its last event and is only tearing down (a CLI
run ends right after that event). So a worker never makes one for tqdm's lock (the only one the
training stack made: huggingface_hub's ``thread_map`` asks tqdm for a multiprocessing RLock), and at
exit live workers are asked to end and given EXIT_GRACE_S seconds before multiprocessing kills them.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # noqa: F401 - registers its exit handler first, so ours runs before it
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Optional

from trainer_core.process.context import name_this_process, worker_context
from trainer_core.process.exit_reason import KillEvidence
from trainer_core.process.parent import ignore_interrupts, remember_app

Event = tuple  # (kind: str, payload: dict)
DRAIN_S = 0.5  # how long to wait for each event a dead worker may still have in the pipe
TERMINATE_GRACE_S = 1.0  # SIGTERM -> SIGKILL delay
EXIT_GRACE_S = 5.0  # at interpreter exit, how long live workers get (in all) to end on their own
_started: weakref.WeakSet[WorkerProcess] = weakref.WeakSet()


def run_target(environment: dict[str, str], app_pid: int, target: Callable[..., None], *args: Any) -> None:
    """Worker process entry point: take the app's ``environment`` (a forked worker has its
    forkserver's, see ``process.context``), remember the app's pid (``parent.remember_app``), leave Ctrl-C to the app (``parent.ignore_interrupts``),
    make tqdm use a thread lock (no multiprocessing semaphore to leak if this process is killed; its
    bars are in this process only), then ``target(*args)``."""
    from tqdm import tqdm

    if os.environ != environment:
        os.environ.clear()
        os.environ.update(environment)
    from trainer_core.settings import get_settings

    name_this_process(multiprocessing.current_process().name)
    get_settings.cache_clear()  # the settings of the environment just taken, not the forkserver's
    remember_app(app_pid)
    ignore_interrupts()
    tqdm.set_lock(threading.RLock())
    target(*args)


def _let_workers_end() -> None:
    """At interpreter exit, before multiprocessing's own handler SIGTERMs daemon children: ask
    long-lived workers to exit (a ``None`` command) and wait up to EXIT_GRACE_S s in all for every
    live worker to end by itself, unlinking its semaphores."""
    live = [worker for worker in list(_started) if worker.pid is not None and worker.is_alive()]
    for worker in live:
        if worker.commands is not None:
            try:
                worker.commands.put(None)
            except (OSError, ValueError):  # queue already closed
                pass
    deadline = time.monotonic() + EXIT_GRACE_S
    for worker in live:
        worker.join(max(0.0, deadline - time.monotonic()))


atexit.register(_let_workers_end)


class WorkerExited(RuntimeError):
    """The worker ended and every event it sent has been read; ``reason`` says why, for the user."""

    def __init__(self, exitcode: Optional[int], reason: str) -> None:
        super().__init__(reason)
        self.exitcode, self.reason = exitcode, reason


class WorkerProcess:
    """A worker process (``process.context``: forked from a preloaded server, or spawned) with its queues. Create it with ``create`` (then ``start``)
    or wrap an already running process (a standby worker) with the constructor."""

    def __init__(
        self,
        process: Any,
        events: Any,
        stop: Any,
        commands: Any = None,
        label: str = "training worker",
        oom_hint: Optional[str] = None,
    ) -> None:
        self.process, self.events, self.stop, self.commands = process, events, stop, commands
        self.label, self.oom_hint = label, oom_hint
        self.evidence: Optional[KillEvidence] = None if process.pid is None else KillEvidence()
        self._exited = False

    @classmethod
    def create(
        cls,
        target: Callable[..., None],
        args: tuple = (),
        name: str = "worker",
        commands: bool = False,
        label: str = "training worker",
        oom_hint: Optional[str] = None,
    ) -> WorkerProcess:
        """A daemon process (not started) that will run ``target(*args, [commands,] events, stop)``."""
        ctx = worker_context()
        events, stop = ctx.Queue(), ctx.Event()
        command_queue = ctx.Queue() if commands else None
        pipes = (command_queue, events, stop) if commands else (events, stop)
        process = ctx.Process(
            target=run_target, args=(dict(os.environ), os.getpid(), target, *args, *pipes), name=name, daemon=True
        )
        return cls(process, events, stop, command_queue, label, oom_hint)

    # ----- life -----
    def start(self) -> None:
        """Start the process and begin collecting evidence about a possible kill."""
        self.process.start()
        _started.add(self)
        self.watch()

    def watch(self) -> None:
        """Collect evidence about a possible kill afresh from now (a standby worker given its job)."""
        self.evidence = KillEvidence()

    @property
    def pid(self) -> Optional[int]:
        """The process id (None before ``start``)."""
        return self.process.pid

    @property
    def exitcode(self) -> Optional[int]:
        """None while running; negative: killed by that signal."""
        return self.process.exitcode

    def is_alive(self) -> bool:
        """True while the process runs."""
        return self.process.is_alive()

    def join(self, timeout_s: Optional[float] = None) -> None:
        """Wait up to ``timeout_s`` seconds for the process to end (nothing if never started)."""
        if self.process.pid is not None:
            self.process.join(timeout_s)

    def terminate(self, grace_s: float = TERMINATE_GRACE_S) -> None:
        """SIGTERM, then SIGKILL after ``grace_s`` seconds (nothing if it has exited or never started)."""
        if self.process.pid is None:
            return
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(grace_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)

    def send(self, command: Any) -> None:
        """Put ``command`` on the command queue (long-lived workers only)."""
        if self.commands is None:
            raise RuntimeError(f"the {self.label} takes no commands")
        self.commands.put(command)

    def close(self, timeout_s: float = 5.0) -> None:
        """Ask a long-lived worker to exit (a ``None`` command), wait ``timeout_s`` s, then terminate."""
        if self.commands is not None and self.is_alive():
            self.commands.put(None)
            self.join(timeout_s)
        self.terminate()

    # ----- events -----
    def next_event(self, timeout_s: float) -> Optional[Event]:
        """The next event, or None when none came within ``timeout_s`` seconds while the worker lives.
        Once it has died, the events still in the pipe come first; then raises WorkerExited."""
        if self.evidence is not None:
            self.evidence.sample()
        if not self._exited:
            try:
                return self.events.get(timeout=timeout_s)
            except queue.Empty:
                if self.is_alive():
                    return None
            self._exited = True
        try:
            return self.events.get(timeout=DRAIN_S)
        except (queue.Empty, OSError, EOFError):
            pass
        self.process.join()
        raise WorkerExited(self.exitcode, self.exit_reason())

    def exit_reason(self) -> str:
        """Why the worker ended without a final event (see ``exit_reason.KillEvidence.reason``)."""
        evidence = self.evidence or KillEvidence()
        return evidence.reason(self.exitcode, worker=self.label, oom_hint=self.oom_hint)
