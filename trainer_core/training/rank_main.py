"""Entry point of each launched training process (``python -m trainer_core.training.rank_main``).

A process connects to the job thread's listener (``group.RankGroup``; the address and a one-run
key in ``ADDRESS_ENV`` / ``KEY_ENV``, removed from the environment at once), says its rank and pid,
receives the job (request, job id, run folder) and runs the same ``training.worker.run_worker`` as a
single-process run, with:

- ``RankEvents``: rank 0 sends every event; the other ranks send only their errors (so progress,
  phases and the run folder are rank 0's alone; across machines each machine's first rank reports
  to its own job, and rank 0 alone writes);
- ``GroupStop``: "Stop (save)" reaches every process, and at each step end the processes agree on
  it with one all-reduce (MAX) of a 0/1 flag, so all of them stop, and save once, at the same step.

A process whose error was sent exits with code 1, so the launcher ends the others at once (instead
of them waiting on a collective); one whose connection to the app breaks (the app died) exits with 3.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from multiprocessing.connection import Client, Connection
from typing import Any

from trainer_core.distributed import env
from trainer_core.distributed.launch import ADDRESS_ENV, KEY_ENV, RAY_FILES_ENV, link_family

APP_GONE_EXIT = 3


class RankEvents:
    """The ``events`` queue ``run_worker`` puts ``(kind, payload)`` on, sent over the connection:
    all of them from the process the job thread named its reporter (rank 0; across machines, each
    machine's first rank), only ``error`` events from the others. ``failed`` tells whether an error
    was sent."""

    def __init__(self, conn: Connection, rank: int, reports: bool) -> None:
        self.conn, self.rank, self.reports, self.failed = conn, rank, reports, False
        self._lock = threading.Lock()

    def put(self, event: tuple[str, dict]) -> None:
        """Send ``event`` (the reporter: all; others: errors only)."""
        from trainer_core.training.worker import EventKind

        if event[0] == EventKind.ERROR:
            self.failed = True
        elif not self.reports:
            return
        self.send(("event", event))

    def send(self, message: Any) -> None:
        """Send one message to the job thread (thread-safe); a closed connection drops it."""
        with self._lock:
            try:
                self.conn.send(message)
            except (OSError, ValueError):
                pass


class GroupStop:
    """The ``stop`` event ``run_worker`` polls: ``set`` by a "stop" message from the app; ``is_set``
    is agreed by every process (all-reduce MAX) once the process group exists, so every process
    calls it at the same points (the worker does: after building the trainer, at each step end and
    after the final save)."""

    def __init__(self) -> None:
        self._flag = threading.Event()

    def set(self) -> None:
        """Stop at the next step end (and save)."""
        self._flag.set()

    def is_set(self) -> bool:
        """Whether any process of the group has been asked to stop (this one alone before the group exists)."""
        local = self._flag.is_set()
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return local
        device = (
            torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
        )
        flag = torch.tensor([1 if local else 0], dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        agreed = bool(flag.item())
        if agreed:
            self._flag.set()
        return agreed


def listen(conn: Connection, stop: GroupStop, ending: threading.Event) -> None:
    """Read the app's messages until the connection closes: "stop" sets ``stop``; a connection that
    breaks before ``ending`` is set means the app is gone, and the process exits (APP_GONE_EXIT)."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            if not ending.is_set():
                os._exit(APP_GONE_EXIT)
            return
        if message == "stop":
            stop.set()


def main() -> int:
    """Connect, receive the job, train it (``run_worker``), say goodbye. Returns the exit code."""
    address, key = os.environ.pop(ADDRESS_ENV), bytes.fromhex(os.environ.pop(KEY_ENV))
    rank = env.rank()
    where, family = link_family(address)  # a Unix socket, or TCP for Ray workers on other machines
    conn = Client(where, family=family, authkey=key)
    conn.send(("hello", {"rank": rank, "pid": os.getpid()}))
    request, job_id, output_dir, reports = conn.recv()
    events, stop, ending = RankEvents(conn, rank, reports), GroupStop(), threading.Event()
    threading.Thread(target=listen, args=(conn, stop, ending), name="app-link", daemon=True).start()

    from tqdm import tqdm

    from trainer_core.training.worker import run_worker

    tqdm.set_lock(threading.RLock())  # as process.supervisor.run_target: no semaphore to leak
    files = os.environ.pop(RAY_FILES_ENV, None)
    if files is None:
        run_worker(request, job_id, output_dir, events, stop)
    else:
        _run_with_storage(request, job_id, output_dir, json.loads(files), events, stop, rank)
    ending.set()
    events.send(("bye", {"failed": events.failed}))
    conn.close()
    if events.failed:  # the group is broken: leave without waiting on it (the launcher ends the others)
        import logging

        logging.shutdown()
        os._exit(1)
    _leave_group()
    return 0


def _run_with_storage(
    request: Any, job_id: str, output_dir: str, spec: dict[str, Any], events: RankEvents, stop: GroupStop, rank: int
) -> None:
    """A Ray worker of a run with ``ray_storage_path``: train in a scratch folder on the staged
    inputs, report checkpoints and the final run folder to Ray Train (``training.ray_files``)."""
    from trainer_core.training.ray_files import CheckpointReport, Relabelled, localize, remove_scratch, report_final
    from trainer_core.training.worker import EventKind, run_worker

    try:
        local, out = localize(request, spec)
    except OSError as exc:
        events.put((EventKind.ERROR, {"message": f"ray_storage_path: the inputs cannot be read there ({exc})"}))
        return
    try:
        said = Relabelled(events, out, output_dir)
        run_worker(local, job_id, str(out), said, stop, callbacks=[CheckpointReport()], recorded=request)
        if not events.failed:
            report_final(out, rank)
    finally:
        remove_scratch(out)


def _leave_group() -> None:
    """Destroy the process group (after a completed run; torch warns at exit otherwise)."""
    import torch.distributed as dist

    try:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except RuntimeError:
        pass


if __name__ == "__main__":
    sys.exit(main())
