"""A training worker started ahead of Start (a "standby"), so Start does not wait for imports.

Importing the training stack (torch, transformers, peft with bitsandbytes, trl) takes about 8 s on
this machine before a worker can load anything (bench/latency.py). When a page opens, or a client
calls ``POST /api/train/prewarm``, the runner spawns a worker that imports the stack and then waits
for one job; Start hands the job to it. A standby that gets no job within ``idle_s`` seconds exits,
so an app nobody is looking at holds only its own memory.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from trainer_core.training.worker import exit_with_parent

TRAINING_STACK = ("trainer_core.training.trainer", "trainer_core.data.prepare", "trainer_core.models.loading")  # torch, transformers, peft, trl, datasets
HANDOVER_MARGIN_S = 30.0  # a standby this close to its idle exit (or a quarter of idle_s) is replaced, not used


def standby_main(target: Callable[..., None], modules: tuple[str, ...], idle_s: float, jobs: Any, events: Any,
                 stop: Any, ready: Any) -> None:
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
    """A spawned standby worker and its queues; ``events`` and ``stop`` become the job's."""

    process: Any
    jobs: Any
    events: Any
    stop: Any
    ready: Any
    idle_s: float
    started: float = field(default_factory=time.monotonic)

    def usable(self) -> bool:
        """Alive and not about to time out."""
        margin = min(HANDOVER_MARGIN_S, self.idle_s / 4)
        return self.process.is_alive() and time.monotonic() - self.started < self.idle_s - margin

    def hand_over(self, request: Any, job_id: str, output_dir: str) -> None:
        """Give the standby its job."""
        self.jobs.put((request, job_id, output_dir))

    def close(self) -> None:
        """Let the standby exit (it is not needed any more)."""
        if self.process.is_alive():
            self.jobs.put(None)
            self.process.join(5)
        if self.process.is_alive():
            self.process.terminate()


def spawn_standby(target: Callable[..., None], idle_s: float, modules: tuple[str, ...] = TRAINING_STACK) -> Standby:
    """Start a standby worker that will run ``target`` (the runner's worker function)."""
    ctx = mp.get_context("spawn")
    jobs, events, stop, ready = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    process = ctx.Process(target=standby_main, args=(target, modules, idle_s, jobs, events, stop, ready),
                          name="worker-standby", daemon=True)
    process.start()
    return Standby(process, jobs, events, stop, ready, idle_s)
