"""A training worker started ahead of Start (a "standby"), so Start does not wait for imports.

Importing the training stack (torch, transformers, peft with bitsandbytes, trl) takes about 8 s on
this machine before a worker can load anything (bench/latency.py). When a page opens, or a client
calls ``POST /api/train/prewarm``, the runner spawns a worker that imports the stack and then waits
for one job; Start hands the job to it. A standby that gets no job within ``idle_s`` seconds exits,
so an app nobody is looking at holds only its own memory.
"""

from __future__ import annotations

import importlib
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from trainer_core.process.context import worker_context
from trainer_core.process.parent import exit_with_parent
from trainer_core.process.supervisor import WorkerProcess

TRAINING_STACK = (
    "trainer_core.training.trainer",
    "trainer_core.data.prepared",
    "trainer_core.models.loading",
)  # torch, transformers, peft, trl, datasets
HANDOVER_MARGIN_S = 30.0  # a standby this close to its idle exit (or a quarter of idle_s) is replaced, not used


def standby_main(
    target: Callable[..., None], modules: tuple[str, ...], idle_s: float, ready: Any, jobs: Any, events: Any, stop: Any
) -> None:
    """Process entry point: import ``modules``, set ``ready``, wait up to ``idle_s`` seconds for one
    job tuple (request, job_id, output_dir) and run ``target(*job, events, stop)``; None or no job
    in time ends the process."""
    exit_with_parent()
    for name in modules:
        importlib.import_module(name)
    ready.set()
    try:
        job = jobs.get(timeout=idle_s)
    except queue.Empty:
        return
    if job is not None:
        target(*job, events, stop)


@dataclass
class Standby:
    """A spawned standby worker; its ``worker`` (queues included) becomes the job's."""

    worker: WorkerProcess
    ready: Any
    idle_s: float
    started: float = field(default_factory=time.monotonic)

    @property
    def process(self) -> WorkerProcess:
        """The standby's process (``pid``, ``is_alive()``)."""
        return self.worker

    def usable(self) -> bool:
        """Alive and not about to time out."""
        margin = min(HANDOVER_MARGIN_S, self.idle_s / 4)
        return self.worker.is_alive() and time.monotonic() - self.started < self.idle_s - margin

    def hand_over(self, request: Any, job_id: str, output_dir: str) -> WorkerProcess:
        """Give the standby its job; returns its worker, now the job's."""
        self.worker.send((request, job_id, output_dir))
        self.worker.watch()
        return self.worker

    def close(self) -> None:
        """Let the standby exit (it is not needed any more)."""
        self.worker.close(timeout_s=5)


def spawn_standby(target: Callable[..., None], idle_s: float, modules: tuple[str, ...] = TRAINING_STACK) -> Standby:
    """Start a standby worker that will run ``target`` (the runner's worker function)."""
    ready = worker_context().Event()
    worker = WorkerProcess.create(standby_main, (target, modules, idle_s, ready), name="worker-standby", commands=True)
    worker.start()
    return Standby(worker, ready, idle_s)


def usable_or_none(standby: Optional[Standby]) -> Optional[Standby]:
    """``standby`` when it can still take a job; else None (an unusable one is closed)."""
    if standby is not None and not standby.usable():
        standby.close()
        return None
    return standby


def launch_worker(target: Callable[..., None], standby: Optional[Standby], args: tuple, name: str) -> WorkerProcess:
    """A job's worker, running: ``standby`` given the job (``args``), or a fresh process of ``target``."""
    if standby is not None:
        return standby.hand_over(*args)
    worker = WorkerProcess.create(target, args, name=name)
    worker.start()
    return worker
