"""One spawned worker process and the pipes to it, shared by training and inference.

A worker gets an event queue out (``(kind, payload)`` tuples), a stop ``Event`` in and, for a
long-lived worker, a command queue in; its target is called as ``target(*args, [commands,] events,
stop)``. The supervising thread reads events with ``next_event``, which notices a dead worker, hands
out every event it sent before dying, and then raises ``WorkerExited`` with the reason
(``exit_reason.KillEvidence``: out of memory only on evidence).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
from typing import Any, Callable, Optional

from trainer_core.process.exit_reason import KillEvidence

Event = tuple  # (kind: str, payload: dict)
DRAIN_S = 0.5  # how long to wait for each event a dead worker may still have in the pipe
TERMINATE_GRACE_S = 1.0  # SIGTERM -> SIGKILL delay


class WorkerExited(RuntimeError):
    """The worker ended and every event it sent has been read; ``reason`` says why, for the user."""

    def __init__(self, exitcode: Optional[int], reason: str) -> None:
        super().__init__(reason)
        self.exitcode, self.reason = exitcode, reason


class WorkerProcess:
    """A worker process (spawn context) with its queues. Create it with ``create`` (then ``start``)
    or wrap an already running process (a standby worker) with the constructor."""

    def __init__(self, process: Any, events: Any, stop: Any, commands: Any = None,
                 label: str = "training worker", oom_hint: Optional[str] = None) -> None:
        self.process, self.events, self.stop, self.commands = process, events, stop, commands
        self.label, self.oom_hint = label, oom_hint
        self.evidence: Optional[KillEvidence] = None if process.pid is None else KillEvidence()
        self._exited = False

    @classmethod
    def create(cls, target: Callable[..., None], args: tuple = (), name: str = "worker", commands: bool = False,
               label: str = "training worker", oom_hint: Optional[str] = None) -> "WorkerProcess":
        """A daemon process (not started) that will run ``target(*args, [commands,] events, stop)``."""
        ctx = mp.get_context("spawn")
        events, stop = ctx.Queue(), ctx.Event()
        command_queue = ctx.Queue() if commands else None
        pipes = (command_queue, events, stop) if commands else (events, stop)
        process = ctx.Process(target=target, args=(*args, *pipes), name=name, daemon=True)
        return cls(process, events, stop, command_queue, label, oom_hint)

    # ----- life -----
    def start(self) -> None:
        """Start the process and begin collecting evidence about a possible kill."""
        self.process.start()
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
