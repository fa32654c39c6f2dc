"""The pre-flight check in a worker process of its own, under a memory ceiling: the app's doors (the
API's ``/preflight``, the page's Check, Start's admission) never read or tokenize data in the app.

Reading and tokenizing cost memory in proportion to the data (a single 100 MB row took an in-app
check to 17 GB and the kernel killed the app). Here one long-lived worker (forked from the
forkserver that has the stack imported: ``process.context``) runs one check at a time and keeps
its tokenizers warm, so a check costs what it did in the app plus a pickle each way. The app
watches the worker's resident memory every WATCH_S seconds (psutil) and kills it past
``settings.check_memory_mb`` (``STUDIO_CHECK_MEMORY_MB``); the check then answers with an error
that names the cause and the fix, and the next check starts a fresh worker. A ceiling set inside
the worker (``RLIMIT_AS``) was not used: it counts the address space torch, OpenMP and the
tokenizer's threads reserve without using (several GB at rest), and an allocation it refuses
inside Rust or C++ aborts the process without saying why. A worker that grew by more than
RECYCLE_MB during a check is replaced after it (freed memory is seldom given back to the system),
and one left idle for IDLE_S seconds exits.
"""

from __future__ import annotations

import importlib
import logging
import os
import queue
import threading
import time
from typing import Any, Optional

from trainer_core.data.errors import DatasetError
from trainer_core.preflight.report import Issue, PreflightReport
from trainer_core.process.context import SERVICE_WORKERS
from trainer_core.process.parent import exit_with_parent
from trainer_core.process.supervisor import WorkerExited, WorkerProcess
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings

log = logging.getLogger(__name__)

WATCH_S = 0.05  # how often the app reads the worker's memory while it checks
IDLE_S = 600.0  # an idle worker exits after this many seconds
RECYCLE_MB = 512  # a worker grown by more than this during a check is replaced after it
TIMEOUT_S = 900.0  # a check that takes longer is ended
MEMORY_ENV = "STUDIO_CHECK_MEMORY_MB"
LABEL = "pre-flight check worker"
OOM_HINT = "Split the data into smaller files or shorten its longest rows."


class CheckFailed(RuntimeError):
    """The check raised an unexpected exception (a bug): its type and message; the traceback is logged."""


def check_main(commands: Any, events: Any, stop: Any) -> None:
    """Worker entry point: import the check, report ``ready``, then answer each command
    ``(number, kind, args, environment)`` with an ``answer`` event until None or IDLE_S idle seconds."""
    from trainer_core.data import import_data_stack

    exit_with_parent()
    import_data_stack()  # datasets' progress bars off: the app's console is for its log lines
    importlib.import_module("trainer_core.preflight.check")
    events.put(("ready", {}))
    while True:
        try:
            command = commands.get(timeout=IDLE_S)
        except queue.Empty:
            return
        if command is None:
            return
        number, kind, args, environment = command
        _take_environment(environment)
        events.put(("answer", {"number": number, **_answer(kind, args)}))


def _take_environment(environment: dict[str, str]) -> None:
    """The app's environment as it is now (its settings, limits and allowed folders)."""
    if os.environ != environment:
        from trainer_core.settings import get_settings

        os.environ.clear()
        os.environ.update(environment)
        get_settings.cache_clear()


_stores: dict[str, Any] = {}  # in the worker: the run history by path, opened once


def _store(path: Optional[str]) -> Any:
    """The run history at ``path`` (opened once in the worker), or None."""
    if path is None:
        return None
    from trainer_core.runs.store import RunStore

    return _stores.get(path) or _stores.setdefault(path, RunStore(path))


def _answer(kind: str, args: tuple) -> dict[str, Any]:
    """``{"result": ...}``, ``{"data_error": message}`` or ``{"failed": ..., "trace": ...}``."""
    import traceback

    from trainer_core.preflight import check

    try:
        if kind == "report":
            request, settings, store_path, estimates = args
            store = _store(store_path)
            return {"result": check.run_preflight(request, settings, store, estimates)}
        if kind == "sampled":
            from trainer_core.preflight.sampled import sampled_preflight

            request, settings, store_path = args
            return {"result": sampled_preflight(request, settings, _store(store_path))}
        return {"result": check.start_issues(*args)}
    except DatasetError as exc:
        return {"data_error": str(exc), "fields": exc.fields}
    except Exception as exc:  # noqa: BLE001 - a bug: said to the app, which raises it there
        return {"failed": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}


def memory_issue(used_mb: float, limit_mb: int) -> Issue:
    """The error of a check ended for memory: the figure, the cause and the fixes."""
    return Issue(
        level="error",
        code="check_out_of_memory",
        fields=["local_datasets", "local_eval_datasets"],
        message=f"the check was stopped: reading and tokenizing the data took its worker to {used_mb:,.0f} MB, over "
        f"the limit of {limit_mb:,} MB ({MEMORY_ENV}): split the data into smaller files or shorten its longest rows "
        f"(the limits per value and per row are STUDIO_MAX_FIELD_CHARS and STUDIO_MAX_ROW_CHARS), or raise "
        f"{MEMORY_ENV} if this machine has the memory",
    )


def ended_issue(reason: str) -> Issue:
    """The error of a check whose worker ended without answering (``reason``: ``exit_reason``'s words)."""
    return Issue(
        level="error",
        code="check_worker_ended",
        fields=["local_datasets"],
        message=f"the check could not finish: {reason} Check the data files, then try again",
    )


class _Stopped(Exception):
    """The worker was ended (memory, time) or died; ``issue`` says why."""

    def __init__(self, issue: Issue) -> None:
        super().__init__(issue.message)
        self.issue = issue


class CheckWorker:
    """One check worker, started on first use and again after it ended; one check at a time
    (callers wait their turn). Thread-safe."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self._timeout_s = timeout_s  # a check that takes longer is ended
        self._lock = threading.Lock()
        self._worker: Optional[WorkerProcess] = None
        self._baseline = 0  # the worker's resident bytes when it was ready
        self._number = 0

    def report(
        self, request: TrainingStartRequest, settings: Settings, store: Any = None, estimates: bool = True
    ) -> PreflightReport:
        """``preflight.check.run_preflight`` run in the worker (``store``: its ``path`` is opened
        there). A check stopped for memory or a worker that died is a report with that error."""
        started = time.perf_counter()
        path = str(store.path) if store is not None else None
        try:
            return self._call(settings, "report", (request, settings, path, estimates))
        except _Stopped as stopped:
            from trainer_core.data.preview_tokenizer import local_model_folder
            from trainer_core.preflight.check import refused_report

            here = local_model_folder(request.model_name, settings) is not None
            return refused_report(request, [stopped.issue], started, tokenizer_found=here)

    def sampled(
        self, request: TrainingStartRequest, settings: Settings, store: Any = None
    ) -> Optional[PreflightReport]:
        """``preflight.sampled.sampled_preflight`` run in the worker (None: the sample cannot stand
        for the data); stopped or died: a report with that error, as ``report``."""
        started = time.perf_counter()
        try:
            return self._call(settings, "sampled", (request, settings, str(store.path) if store is not None else None))
        except _Stopped as stopped:
            from trainer_core.preflight.check import refused_report

            return refused_report(request, [stopped.issue], started)

    def start_issues(self, request: TrainingStartRequest, settings: Settings) -> list[Issue]:
        """``preflight.check.start_issues`` run in the worker; a check stopped for memory or a
        worker that died is that one error. Raises DatasetError as it does."""
        try:
            return self._call(settings, "start_issues", (request, settings))
        except _Stopped as stopped:
            return [stopped.issue]

    def close(self) -> None:
        """End the worker (the next check starts a fresh one)."""
        with self._lock:
            self._end()

    def interrupt(self) -> None:
        """End the worker now, without waiting for the check it runs (which answers that it was
        ended); the next check starts a fresh one."""
        worker = self._worker
        if worker is not None:
            worker.terminate(grace_s=0.5)

    @property
    def pid(self) -> Optional[int]:
        """The live worker's process id, or None."""
        worker = self._worker
        return worker.pid if worker is not None and worker.is_alive() else None

    def _call(self, settings: Settings, kind: str, args: tuple) -> Any:
        with self._lock:
            limit = settings.check_memory_mb * 2**20
            worker = self._live(limit)
            self._number += 1
            worker.send((self._number, kind, args, dict(os.environ)))
            answer = self._wait(worker, "answer", limit, self._timeout_s, self._number)
            if self._rss(worker) > self._baseline + RECYCLE_MB * 2**20:
                self._end()
        if "data_error" in answer:
            raise DatasetError(answer["data_error"], fields=answer["fields"])
        if "failed" in answer:
            log.error("the pre-flight check failed in its worker:\n%s", answer["trace"])
            raise CheckFailed(answer["failed"])
        return answer["result"]

    def _live(self, limit: int) -> WorkerProcess:
        """The running worker, or a new one once it has imported the check."""
        if self._worker is not None and self._worker.is_alive():
            return self._worker
        self._end()
        worker = WorkerProcess.create(
            check_main, name=SERVICE_WORKERS[0], commands=True, label=LABEL, oom_hint=OOM_HINT
        )
        worker.start()
        self._worker = worker
        self._wait(worker, "ready", limit, TIMEOUT_S)
        self._baseline = self._rss(worker)
        log.info("pre-flight check worker %d ready: %.0f MB resident", worker.pid, self._baseline / 2**20)
        return worker

    def _wait(
        self, worker: WorkerProcess, kind: str, limit: int, timeout_s: float, number: Optional[int] = None
    ) -> dict[str, Any]:
        """The payload of the worker's next ``kind`` event (the answer to command ``number``),
        watching its memory meanwhile. Raises _Stopped when it passes ``limit`` bytes or
        ``timeout_s`` seconds (it is ended) or dies."""
        import psutil

        process = psutil.Process(worker.pid)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                event = worker.next_event(WATCH_S)
            except WorkerExited as exited:
                self._worker = None
                raise _Stopped(ended_issue(exited.reason)) from None
            if event is not None and event[0] == kind and event[1].get("number") == number:
                return event[1]
            try:
                used = process.memory_info().rss
            except psutil.Error:
                continue  # it has just ended: next_event says why
            if used > limit:
                self._end()
                log.warning("pre-flight check worker ended at %.0f MB (limit %d MB)", used / 2**20, limit // 2**20)
                raise _Stopped(memory_issue(used / 2**20, limit // 2**20))
            if time.monotonic() > deadline:
                self._end()
                raise _Stopped(ended_issue(f"it took more than {timeout_s:.0f} s and was ended."))

    @staticmethod
    def _rss(worker: WorkerProcess) -> int:
        import psutil

        try:
            return psutil.Process(worker.pid).memory_info().rss
        except psutil.Error:
            return 0

    def _end(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.terminate(grace_s=0.5)


_checker = CheckWorker()


def check_report(
    request: TrainingStartRequest, settings: Settings, store: Any = None, estimates: bool = True
) -> PreflightReport:
    """The pre-flight report of ``request`` (paths already checked), made in the app's check worker."""
    return _checker.report(request, settings, store, estimates)


def check_start_issues(request: TrainingStartRequest, settings: Settings) -> list[Issue]:
    """The errors Start refuses on (``check.start_issues``), found in the app's check worker."""
    return _checker.start_issues(request, settings)


def checker() -> CheckWorker:
    """The app's check worker (for tests and benchmarks: its ``pid``, ``close``)."""
    return _checker


__all__ = ["CheckFailed", "CheckWorker", "check_report", "check_start_issues", "checker", "memory_issue"]
