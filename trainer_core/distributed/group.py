"""The job thread's side of a launched group of training processes: ``RankGroup``.

It offers what ``runs.job.JobRunner`` uses of a ``process.supervisor.WorkerProcess`` (``stop``,
``next_event``, ``terminate``, ``join``, ``pid``, ``is_alive``), so a multi-process run is supervised
like a single one. The launcher (``launch.launcher_command``) runs in its own session with its
output in ``<run folder>/launcher.log``; each process connects back to a private Unix socket
(``multiprocessing.connection``, authenticated with a one-run key), says its rank and pid, and is
sent the job.

Events: rank 0's are handed out as they come (``rank_main.RankEvents`` sends the other ranks'
errors only); in a run across machines (``num_nodes`` > 1) each machine's job hears its own first
rank instead (the same values: the logged loss is averaged over every process). When a process fails (an error event, or its connection closes without a goodbye:
killed), the group waits for the launcher to end the others (at most LAUNCHER_WAIT_S s), ends what
is left, and reports the process the launcher names as the first to fail
(``failure.root_cause``; for Ray, the first worker its raylet reports dead: ``failure.ray_deaths``):
its error message, or how it died, naming its rank and the last checkpoint left to resume.
Cancel (``terminate``) ends the launcher and every process: SIGTERM, SIGKILL after ``grace_s``.
"""

from __future__ import annotations

import atexit
import logging
import secrets
import subprocess
import threading
import time
import weakref
from collections import deque
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, Listener, wait
from pathlib import Path
from typing import Any, Optional

from trainer_core.distributed import ending, failure
from trainer_core.distributed.launch import (
    Devices,
    launcher_command,
    launcher_env,
    launcher_name,
    link_endpoint,
    machine_devices,
)
from trainer_core.process.exit_reason import KillEvidence
from trainer_core.process.supervisor import Event, WorkerExited
from trainer_core.schemas import TrainingStartRequest

log = logging.getLogger(__name__)
LAUNCHER_WAIT_S = 30.0  # after a process fails: how long the launcher gets to end the others itself (torchrun: SIGTERM, 30 s, SIGKILL)
HELLO_TIMEOUT_S = 10.0  # a connection that says nothing for this long is dropped
ERROR = "error"  # training.worker.EventKind.ERROR (not imported: that module imports the training stack)
INFO = "info"
_live: weakref.WeakSet[RankGroup] = weakref.WeakSet()


class _StopSender:
    """``RankGroup.stop``: ``set`` sends "stop" to every process (and to any that connects later)."""

    def __init__(self, group: RankGroup) -> None:
        self._group, self._flag = group, threading.Event()

    def set(self) -> None:
        self._flag.set()
        self._group.broadcast("stop")

    def is_set(self) -> bool:
        return self._flag.is_set()


class RankGroup:
    """``request.num_processes`` training processes started by torchrun (or accelerate launch) for
    one job; create it with ``launch``."""

    def __init__(
        self, request: TrainingStartRequest, job_id: str, output_dir: Path, devices: Optional[Devices] = None
    ) -> None:
        self.size, self.label = request.num_processes, "training worker"
        self.launcher = launcher_name(request)
        self.log_path = Path(output_dir) / "launcher.log"
        self._job = (request, job_id, str(output_dir))
        self._key = secrets.token_bytes(32)
        endpoint = link_endpoint(request)  # workers on other machines: TCP; else a Unix socket
        self._listener = (
            Listener((endpoint, 0), family="AF_INET", authkey=self._key)
            if endpoint
            else Listener(family="AF_UNIX", authkey=self._key)
        )
        self._devices = devices or machine_devices()
        self._lock = threading.Lock()
        self._conns: dict[int, Connection] = {}
        self.pids: dict[int, int] = {}
        self._pending: deque[Event] = deque()
        self._said_bye: set[int] = set()
        self._errors: list[tuple[int, str]] = []
        self._silent: list[int] = []
        self._trouble_since: Optional[float] = None
        self.stop = _StopSender(self)
        self.evidence = KillEvidence()
        self.process: Optional[subprocess.Popen] = None
        self._ended: Optional[str] = None  # once the group has been ended: why (next_event raises it)
        # the rank that reports progress to this machine's job: rank 0, or this machine's first (num_nodes > 1)
        self._reporter = request.node_rank * request.num_processes if request.num_nodes > 1 else 0
        # a ray_storage_path run ends when its driver has copied the results in: its "done" waits for that
        self._holds_done = request.compute == "ray" and bool(request.ray_storage_path)
        self._held: Optional[Event] = None

    @classmethod
    def launch(cls, request: TrainingStartRequest, job_id: str, output_dir: Path) -> RankGroup:
        """Start the launcher for ``request`` and begin accepting its processes."""
        group = cls(request, job_id, output_dir)
        group.start()
        return group

    def start(self) -> None:
        """Run the launcher (its output in ``launcher.log``) and accept the processes in a thread."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        address = self._listener.address
        address = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else address
        env = launcher_env(self._job[0], address, self._key, self._devices, Path(self._job[2]), self._job[1])
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                launcher_command(self._job[0]),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _live.add(self)
        request = self._job[0]
        if request.num_nodes > 1:  # torchrun waits for every machine before anything is loaded: say so
            self._pending.append((INFO, {"message": (
                f"Waiting for all {request.num_nodes} machines at {request.rdzv_endpoint} (torchrun's rendezvous): "
                f"start the same command with --node-rank 0 to {request.num_nodes - 1} on each; Cancel ends the wait"
            ), "details": {}}))  # fmt: skip
        threading.Thread(target=self._accept, name="group-accept", daemon=True).start()

    # ----- the processes coming in -----
    def _accept(self) -> None:
        while len(self.pids) < self.size:
            try:
                conn = self._listener.accept()
            except (OSError, EOFError, ValueError, AuthenticationError):  # closed (the group ended), or no key
                if self.process is None or self.process.poll() is not None or self._listener_closed():
                    return
                continue
            try:
                if not conn.poll(HELLO_TIMEOUT_S):
                    raise EOFError("no hello")
                kind, hello = conn.recv()
                rank = int(hello["rank"])
                conn.send((*self._job, rank == self._reporter))
            except (OSError, EOFError, ValueError, TypeError, KeyError):
                conn.close()
                continue
            with self._lock:
                self._conns[rank], self.pids[rank] = conn, int(hello["pid"])
                if self.stop.is_set():
                    self._send(conn, "stop")
        self._pending.append(
            (
                INFO,
                {
                    "message": f"{self.size} training processes started ({self.launcher}{self._where()})",
                    "details": {
                        "num_processes": self.size,
                        "launcher": self.launcher,
                        "rank_pids": [self.pids[r] for r in sorted(self.pids)],
                    },
                },
            )
        )

    def _where(self) -> str:
        """ ", machine R of M" for a run across machines (num_nodes > 1), else ""."""
        request = self._job[0]
        return f", machine {request.node_rank} of {request.num_nodes}" if request.num_nodes > 1 else ""

    def _listener_closed(self) -> bool:
        return getattr(self._listener, "_listener", None) is None

    def broadcast(self, message: Any) -> None:
        """Send ``message`` to every connected process."""
        with self._lock:
            for conn in self._conns.values():
                self._send(conn, message)

    @staticmethod
    def _send(conn: Connection, message: Any) -> None:
        try:
            conn.send(message)
        except (OSError, ValueError):
            pass  # that process is gone; its end is read from its connection

    # ----- like WorkerProcess -----
    @property
    def pid(self) -> Optional[int]:
        """The launcher's process id."""
        return None if self.process is None else self.process.pid

    @property
    def exitcode(self) -> Optional[int]:
        """The launcher's exit code (None while it runs)."""
        return None if self.process is None else self.process.poll()

    def is_alive(self) -> bool:
        """True while the launcher runs."""
        return self.process is not None and self.process.poll() is None

    def join(self, timeout_s: Optional[float] = None) -> None:
        """Wait up to ``timeout_s`` s for the launcher (and so its processes) to end."""
        if self.process is not None:
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass

    def terminate(self, grace_s: float = 1.0) -> None:
        """End the launcher and every process of the group (``ending.end_processes``): SIGTERM, then
        SIGKILL after ``grace_s`` s."""
        if self.process is not None:
            ending.end_processes(self.process, self.pids.values(), grace_s)
        self._ended = self._ended or "The training processes were ended."
        self._close()

    def _close(self) -> None:
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()
        try:
            self._listener.close()
        except OSError:
            pass

    # ----- events -----
    def next_event(self, timeout_s: float) -> Optional[Event]:
        """Rank 0's next event, or None when none came within ``timeout_s`` s while the group runs.
        Raises WorkerExited (naming the rank) or returns one ``error`` event once a process has
        failed and the group has ended; WorkerExited when the launcher ends without a final event."""
        self.evidence.sample()
        if self._pending:
            return self._pending.popleft()
        if self._ended is not None:
            raise WorkerExited(self.exitcode, self._ended)
        with self._lock:
            conns = dict(self._conns)
        try:
            ready = wait(list(conns.values()), timeout_s) if conns else time.sleep(timeout_s) or []
        except (OSError, ValueError):  # a connection closed meanwhile (terminate): read again next time
            ready = []
        for conn in ready:
            self._read(next(r for r, c in conns.items() if c is conn), conn)
        if self._pending:
            return self._pending.popleft()
        ended = self.process is None or self.process.poll() is not None
        if self._held is not None and self._trouble_since is None and ended:
            return self._release_done()
        if self._trouble_since is not None:
            if ended or time.monotonic() - self._trouble_since > LAUNCHER_WAIT_S:
                return self._failure()
        elif ended and not self._open_connections():
            return self._launcher_ended()
        return None

    def _open_connections(self) -> bool:
        with self._lock:
            return bool(self._conns)

    def _read(self, rank: int, conn: Connection) -> None:
        if self._ended is not None:
            return
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            with self._lock:
                self._conns.pop(rank, None)
            conn.close()
            if rank not in self._said_bye:
                self._silent.append(rank)
                self._trouble_since = self._trouble_since or time.monotonic()
            return
        if kind == "bye":
            self._said_bye.add(rank)
        elif kind == "event" and payload[0] == ERROR:
            self._errors.append((rank, payload[1]["message"]))
            self._trouble_since = self._trouble_since or time.monotonic()
        elif kind == "event" and payload[0] == "done" and self._holds_done:
            self._held = payload
        elif kind == "event":
            self._pending.append(payload)

    def _failure(self) -> Event:
        """End what is left of the group and say which process failed first (see the module doc).
        A launcher killed from outside (no summary of its own) is named instead of a rank."""
        launcher_code = self.exitcode
        self.terminate()
        hint = failure.resume_hint(Path(self._job[2]))  # the checkpoints left once every process has ended
        tail = failure.log_tail(self.log_path)
        cause = failure.root_cause(tail)
        if cause is None and launcher_code is not None and launcher_code < 0:
            reason = self.evidence.reason(launcher_code, worker=f"{self.launcher} launcher (pid {self.pid})")
            raise WorkerExited(launcher_code, f"{reason} The studio ended the training processes.")
        messages = dict(reversed(self._errors))  # each rank's first error
        if cause is not None:  # a peer's "connection closed" named first: the killed process it lost came first
            cause = failure.killed_peer(tail, cause, messages.get(cause.rank, "")) or cause
        died = self._ray_death(tail) if cause is None else None
        if died is not None:
            rank, detail = died
            worker = f"training process of rank {rank} (of {self.size}, pid {self.pids[rank]})"
            raise WorkerExited(
                None,
                f"The {worker} died on the Ray cluster ({detail or 'no reason given'} It was killed, ran out of "
                f"memory or crashed); {self.launcher} ended the others.{hint} "
                f"See launcher.log in the run folder.",
            )
        # no account from the launcher: a process that died without a word came first (the others' errors,
        # gloo's "connection reset by peer", follow from it); else the first error
        rank = cause.rank if cause is not None else (self._silent[0] if self._silent else self._errors[0][0])
        if rank in messages:
            text = messages[rank]
            if rank != 0 and messages.get(0) != text:
                text = f"Rank {rank} of {self.size}: {text}"
            return ERROR, {"message": text}
        exitcode = cause.exitcode if cause is not None and cause.rank == rank else None
        worker = f"training process of rank {rank} (of {self.size}, pid {self.pids.get(rank, '?')})"
        if exitcode is None:
            raise WorkerExited(
                None,
                f"The {worker} ended without a word; {self.launcher} ended the others.{hint} "
                f"See launcher.log in the run folder.",
            )
        reason = self.evidence.reason(exitcode, worker=worker)
        raise WorkerExited(exitcode, f"{reason} {self.launcher} ended the other processes.{hint}")

    def _release_done(self) -> Event:
        """The held "done" once the driver has ended: as sent when it copied the results in (exit 0),
        else an error naming launcher.log."""
        held, self._held = self._held, None
        if self.exitcode == 0:
            return held
        return ERROR, {
            "message": failure.results_not_copied(self.launcher, self.exitcode, failure.log_tail(self.log_path))
        }

    def _ray_death(self, text: str) -> Optional[tuple[int, str]]:
        """(rank, Ray's exit detail) of the first process Ray's raylet reported dead without a
        goodbye (``failure.first_ray_death``), or None (not a Ray run, or no such report)."""
        if self.launcher != "Ray Train":
            return None
        return failure.first_ray_death(text, self.pids, self._said_bye)

    def _launcher_ended(self) -> Event:
        """The launcher ended and every process is gone, with no final event and no failure seen."""
        self.terminate()
        raise WorkerExited(
            self.exitcode, failure.launcher_ended(self.launcher, self.exitcode, failure.log_tail(self.log_path))
        )


@atexit.register
def _end_live_groups() -> None:
    """At interpreter exit, end every group still running (its processes would also notice the app's
    connection closing and exit; this is sooner)."""
    for group in list(_live):
        if group.is_alive():
            group.terminate()
