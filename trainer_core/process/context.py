"""How worker processes start: forked from a server process that has already imported the training
stack (multiprocessing's ``forkserver`` with preloaded modules) on a Linux machine without a GPU,
else ``spawn``.

Importing torch, transformers, peft (with bitsandbytes), trl and datasets costs about 8 s of CPU in
every fresh interpreter on this machine (``python -X importtime``). A spawned worker pays it for
every training run, chat model and export; the forkserver pays it once, at its first worker, and
each later worker is a fork of it that starts in well under a second (bench/latency.py measures
both). The forkserver is a fresh interpreter (not a fork of the app) and ends when the app does.

On a GPU machine the imports may initialise the driver (bitsandbytes asks for the device), and a
forked child cannot use CUDA after its parent did, so workers are spawned there: a GPU is seen as
``/dev/nvidia*`` (CUDA), ``/dev/kfd`` (ROCm) or ``/dev/dxg`` (WSL), without importing torch in the
app. ``STUDIO_WORKER_START=spawn`` or ``forkserver`` overrides the choice.

The first worker waits until the forkserver has imported the stack (multiprocessing blocks in
``Process.start`` until then): callers that hold a lock others wait on (the job runner's status
lock) call ``wait_until_ready`` first, or ``warm_in_background`` (the page load's prewarm).

A forked worker inherits the forkserver's environment, not the app's at the time of the fork, so
``supervisor.run_target`` sets the app's environment (passed with the job) before the target runs.
"""

from __future__ import annotations

import glob
import multiprocessing as mp
import os
import sys
import threading
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import Any, Optional

START_ENV = "STUDIO_WORKER_START"
PRELOAD = (
    "trainer_core.training.trainer",
    "trainer_core.data.prepared",
    "trainer_core.models.loading",
    "trainer_core.serving.worker",
)  # torch, transformers, peft, trl, datasets; what training, chat and export workers import first
GPU_DEVICES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")
_ready = threading.Event()  # a worker has been forked: the forkserver has imported the stack
_warming = threading.Lock()  # guards _warmer
_warmer: Optional[threading.Thread] = None


def has_gpu_device() -> bool:
    """True when the kernel shows a CUDA, ROCm or WSL GPU device node (no torch import)."""
    return any(glob.glob(pattern) for pattern in GPU_DEVICES)


def start_method() -> str:
    """``forkserver`` on Linux without a GPU device, else ``spawn``; ``STUDIO_WORKER_START`` overrides.

    Raises ValueError when ``STUDIO_WORKER_START`` names another method."""
    chosen = os.environ.get(START_ENV, "").strip()
    if chosen:
        if chosen not in ("spawn", "forkserver"):
            raise ValueError(f"{START_ENV} must be spawn or forkserver, not {chosen!r}")
        return chosen
    return "forkserver" if sys.platform.startswith("linux") and not has_gpu_device() else "spawn"


def worker_context() -> BaseContext:
    """The multiprocessing context every worker (and its queues and events) is made from."""
    method = start_method()
    context = mp.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(list(PRELOAD))
    return context


def _started() -> None:
    """Target of the probe process ``wait_until_ready`` forks: it only has to start."""


def ready_now() -> bool:
    """True when a worker starts at once: spawn, or a forkserver that has imported the stack."""
    return _ready.is_set() or start_method() != "forkserver"


def _warm() -> None:
    try:
        probe = worker_context().Process(target=_started, name="forkserver-probe", daemon=True)
        probe.start()
        probe.join()
    finally:  # a forkserver that cannot start: the worker's own start raises the real error
        _ready.set()


def wait_until_ready(timeout_s: Optional[float] = None) -> bool:
    """Wait up to ``timeout_s`` seconds (None: as long as it takes) until a worker can start at
    once; True when it can. The first time on a forkserver machine that is when the forkserver has
    imported the stack (about 8 s here), found by forking a probe that exits at once, in a thread
    of its own, so the caller can give up and look again (a Cancel meanwhile). Thread-safe; call
    it outside any lock that others wait on."""
    global _warmer
    if ready_now():
        return True
    with _warming:
        if _warmer is None:
            _warmer = threading.Thread(target=_warm, name="forkserver-warm", daemon=True)
            _warmer.start()
    return _ready.wait(timeout_s)


def warm_in_background(then: Callable[[], Any]) -> bool:
    """True when a worker can start at once; else False, after starting a thread that waits until
    it can (``wait_until_ready``) and then calls ``then`` (e.g. make the standby)."""
    if ready_now():
        return True

    def warm_then() -> None:
        wait_until_ready()
        then()

    threading.Thread(target=warm_then, name="forkserver-then", daemon=True).start()
    return False


SERVICE_WORKERS = ("studio-check",)  # long-lived helpers of the app (process names), not a job's workers
PR_SET_NAME = 15  # prctl(2): the calling thread's name, what ps, top and psutil show (15 bytes)


def name_this_process(name: str) -> None:
    """Give this process the name ``name`` (cut to 15 bytes) where Linux allows it (``prctl``), so
    ``ps``, ``top`` and ``worker_processes`` tell a worker by its job; elsewhere nothing happens."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, name.encode("ascii", "replace")[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def worker_processes(app_pid: int) -> list[Any]:
    """The live worker processes (``psutil.Process``) that the app with pid ``app_pid`` started for
    jobs: its spawned children, or the forks of its forkserver; not the forkserver itself, its
    resource tracker, a tool it ran or a long-lived helper (``SERVICE_WORKERS``: the pre-flight
    check's worker). Processes that end while being looked at are left out; an app that has ended
    has none. For benchmarks and tests that watch workers come and go."""
    import psutil

    try:
        descendants = psutil.Process(app_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    workers = []
    for child in descendants:
        try:
            command, parent, status = " ".join(child.cmdline()), child.ppid(), child.status()
            if child.name() in SERVICE_WORKERS:
                continue
        except psutil.Error:  # gone while being looked at
            continue
        forked = "multiprocessing.forkserver" in command and parent != app_pid
        if ("spawn_main" in command or forked) and status != psutil.STATUS_ZOMBIE:
            workers.append(child)
    return workers
