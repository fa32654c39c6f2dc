"""The single-job runner: one job per app process, whoever asks.

``start`` takes a non-blocking lock that the job thread holds for the job's whole life; the job
thread spawns the worker process (``process.supervisor``; several processes through a launcher:
``distributed.group``), drains its event queue into
``MetricsHistory`` (so training never waits on a browser), and turns a worker that dies into phase
``error``. Progress events get training time continued over resumes (``RunClock``) before they are
stored; ``status().details`` adds wall time, throughput and, once ended, ``end_reason``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainer_core.distributed.group import RankGroup
from trainer_core.distributed.launch import uses_launcher
from trainer_core.process.context import wait_until_ready, warm_in_background
from trainer_core.process.standby import TRAINING_STACK, Standby, launch_worker, spawn_standby, usable_or_none
from trainer_core.process.supervisor import WorkerExited, WorkerProcess
from trainer_core.runs.clock import RunClock
from trainer_core.runs.ending import Settled, cancelled_message, end_reason, reap, settle_run
from trainer_core.runs.folders import OutputDirError
from trainer_core.runs.metrics import MetricsHistory
from trainer_core.runs.opening import open_run
from trainer_core.runs.resume import ResumeError
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings
from trainer_core.status import TrainingJobResponse, TrainingProgress, TrainingStatus
from trainer_core.training.worker import EventKind, run_worker
from trainer_core.vocabulary import LIVE_PHASES, EndReason, Phase

log = logging.getLogger(__name__)
Outcome = tuple  # (Phase, message, error or None): how a job ended
POLL_S = 0.1  # how often the job thread checks the worker between events
CANCEL_GRACE_S = 1.0  # SIGTERM -> SIGKILL delay on cancel
REAP_S = 5.0  # how long an ended job's worker gets to exit by itself


class JobRunner:
    """Owns the one job: start / stop / cancel / reset and a consistent status for every client.

    ``before_start`` (None, or a callable without arguments) is called by ``start`` once the job is
    accepted and before its worker is spawned; the server sets it to the chat engine's ``unload``
    (training has the machine). An exception from it is logged; the job starts anyway.
    ``start_refusal`` (None, or a callable returning a reason or None) refuses a Start while a
    background task (export, evaluation) has the machine. ``on_end`` (None, or a callable without
    arguments) is called by the job thread once a job has ended and a new Start is accepted (the
    job queue's dispatcher starts the next job then); ``more_queued`` (None, or a callable returning
    whether a queued job waits) lets watchers keep following between queued jobs."""

    def __init__(
        self,
        worker_target: Callable[..., None] = run_worker,
        runs_dir: Optional[Path] = None,
        store: Optional[RunStore] = None,
        standby_idle_s: float = 600.0,
        warm_modules: tuple[str, ...] = TRAINING_STACK,
    ) -> None:
        self._worker_target = worker_target
        self._standby: Optional[Standby] = None
        self._standby_idle_s, self._warm_modules = standby_idle_s, warm_modules
        self._runs_dir = runs_dir
        self.store = store
        self._job_lock = threading.Lock()  # held from start until the job thread ends
        self._state = threading.RLock()  # guards the fields below
        self._status = TrainingStatus()
        self._details: dict[str, Any] = {}
        self._clock: Optional[RunClock] = None
        self._process: Optional[WorkerProcess | RankGroup] = None
        self._stop: Optional[Any] = None
        self.before_start: Optional[Callable[[], None]] = None
        self.start_refusal: Optional[Callable[[], Optional[str]]] = None
        self.on_end: Optional[Callable[[], None]] = None
        self.more_queued: Optional[Callable[[], bool]] = None
        self._cancelled = False
        self._request: Optional[TrainingStartRequest] = None
        self._thread: Optional[threading.Thread] = None
        self.history = MetricsHistory()

    # ----- commands -----
    def starts_held(self) -> threading.RLock:
        """The lock ``start`` holds from its checks until the job is on: hold it to check that no
        job runs and claim the machine for something else in one step (``TaskRunner.start``), so
        that a Start cannot slip in between."""
        return self._state

    def start(self, request: TrainingStartRequest) -> TrainingJobResponse:
        """Queue a job; ``status="error"`` (and nothing changed) if one is already running. The
        state lock is held throughout, so a refused caller always sees the winner's job id."""
        with self._state:
            if not self._job_lock.acquire(blocking=False):
                return TrainingJobResponse(
                    job_id=self._status.job_id,
                    status="error",
                    message="A training job is already in progress.",
                    error=f"job {self._status.job_id} is in phase {self._status.phase.value}; stop it or wait for it to finish",
                )
            if self.start_refusal is not None and (busy := self.start_refusal()):
                self._job_lock.release()
                return TrainingJobResponse(status="error", message="The job could not be started.", error=busy)
            try:
                opened = open_run(request, self.store, self.history, self._runs_dir or get_settings().runs_dir)
            except (ResumeError, OutputDirError, OSError, sqlite3.Error) as exc:
                self._job_lock.release()
                return TrainingJobResponse(status="error", message="The job could not be started.", error=str(exc))
            job_id, output_dir = opened.job_id, opened.output_dir
            self._status = TrainingStatus(
                job_id=job_id,
                phase=Phase.loading_model,
                is_training_running=True,
                message="Starting the training worker",
            )
            self._details = {"output_dir": str(output_dir)}
            self._clock = RunClock(opened.created_at, opened.training_seconds_before)
            self._cancelled, self._request = False, request
            self._call_before_start()
            self._thread = threading.Thread(
                target=self._run, args=(request, job_id, output_dir), name=f"job-{job_id}", daemon=True
            )
            self._thread.start()
        return TrainingJobResponse(
            job_id=job_id, status="queued", message=f"Job {job_id} started; output in {output_dir}"
        )

    def _call_before_start(self) -> None:
        """Run the ``before_start`` hook (status already says a job runs, so chat refuses meanwhile)."""
        if self.before_start is None:
            return
        try:
            self.before_start()
        except Exception:  # noqa: BLE001 - the job goes ahead; the hook's owner has logged its side
            log.exception("before_start hook failed")

    def prewarm(self) -> bool:
        """Have a standby worker import the training stack now, so the next Start skips that
        (see ``standby``). Nothing happens while a job runs. Returns whether a standby is ready.
        The first time on a forkserver machine (``process.context``) the forkserver imports the
        stack in the background first, and the standby follows it."""
        if not warm_in_background(self.prewarm):
            return False
        stale = None
        with self._state:
            if self._status.is_training_running:
                return False
            if self._standby is None or not self._standby.usable():
                stale = self._standby
                self._standby = spawn_standby(self._worker_target, self._standby_idle_s, self._warm_modules)
            ready = self._standby.ready.is_set()
        if stale is not None:
            stale.close()  # outside the lock: it may wait a few seconds
        return ready

    def stop(self, save: bool = True) -> bool:
        """Stop the running job: ``save`` stops at the next step and saves it; otherwise cancel
        (the worker is ended within ~1 s in any phase). False when nothing runs."""
        with self._state:
            process, stop_event = self._process, self._stop
            if not self._status.is_training_running:
                return False
            if save and self._status.phase == Phase.training and stop_event is not None:
                stop_event.set()
                self._set(message="Stopping at the next step and saving")
                return True
            self._cancelled = True
            self._set(message="Cancelling")
        if process is not None:
            process.terminate(CANCEL_GRACE_S)
        return True

    def reset(self, end_cancelled: bool = False) -> bool:
        """Back to idle with an empty history; False (nothing changed) while a job runs, except
        that with ``end_cancelled`` a job already being cancelled is ended first."""
        with self._state:
            running, cancelled, process = self._status.is_training_running, self._cancelled, self._process
        if running and not (end_cancelled and cancelled):
            return False
        if running:
            if process is not None:
                process.terminate(CANCEL_GRACE_S)
            self.wait(10)
        with self._state:
            if self._status.is_training_running:
                return False
            self._status, self._details, self._clock = TrainingStatus(), {}, None
            self.history.reset()
        return True

    def wait(self, timeout_s: Optional[float] = None) -> bool:
        """Block until the current job thread ends; True if it has ended."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return thread is None or not thread.is_alive()

    # ----- reads -----
    def status(self, with_history: bool = True) -> TrainingStatus:
        """A consistent copy of the status with details and (unless ``with_history`` is False; an
        O(history) copy) the full metric series.

        Details, besides the worker's: the newest train step's values (``elapsed_seconds`` is
        training seconds, continued over resumes); ``started_at`` (the run's creation, Unix s),
        ``wall_seconds`` (since then, to now or to the end; idle gaps between Stop and Resume
        included) and ``tokens_per_second`` (this session's rate; see ``RunClock.rate``) while a job
        exists; ``end_reason`` (an ``EndReason`` value), ``best_checkpoint`` and ``best_eval_loss``
        once it has ended, and ``stop_reason`` when early stopping ended it."""
        with self._state:
            status = self._status.model_copy(deep=True)
            details = dict(self._details)
            latest = self.history.latest_train()
            if self._clock is not None:
                details.update(self._clock.details(latest))
        if latest is not None:
            details.update(
                latest.model_dump(
                    include={
                        "step",
                        "total_steps",
                        "epoch",
                        "loss",
                        "learning_rate",
                        "progress_percent",
                        "elapsed_seconds",
                        "eta_seconds",
                        "eta_low_seconds",
                        "eta_high_seconds",
                    }
                )
            )
        status.details = details
        if with_history:
            status.metric_history = self.history.series()
        return status

    # ----- the job thread -----
    def _set(self, **fields: Any) -> None:
        with self._state:
            self._status = self._status.model_copy(update=fields)
        self.history.touch()

    def _run(self, request: TrainingStartRequest, job_id: str, output_dir: Path) -> None:
        worker: Optional[WorkerProcess | RankGroup] = None
        final: Outcome = (Phase.error, "The job ended without a result.", "no final event")
        try:
            while not wait_until_ready(timeout_s=0.1):  # the first fork waits for the stack's imports
                with self._state:
                    if self._cancelled:  # ended below, without a worker
                        break
            with self._state:
                standby, self._standby = self._standby, None
            standby = usable_or_none(standby)  # closing an unusable one may wait: outside the lock
            with self._state:
                cancelled = self._cancelled
                if not cancelled and uses_launcher(request):  # several processes: the standby waits for a later run
                    self._standby, standby = standby, None
                    worker = RankGroup.launch(request, job_id, output_dir)
                elif not cancelled:
                    worker = launch_worker(
                        self._worker_target, standby, (request, job_id, str(output_dir)), f"worker-{job_id}"
                    )
                if worker is not None:
                    self._process, self._stop = worker, worker.stop
            if cancelled:
                final = (Phase.stopped, "Cancelled before the worker started.", None)
                if standby is not None:
                    standby.close()
                return
            final = self._supervise(worker)
        except Exception as exc:  # noqa: BLE001 - the app must keep serving
            log.exception("job thread failed")
            final = (Phase.error, "The job failed to run.", str(exc))
        finally:
            if worker is not None and worker.pid is not None:
                reap(worker, output_dir, REAP_S, CANCEL_GRACE_S)  # the job ends when its processes have
            ending = self._settle(final[0])  # outside the state lock: it may hash the dataset files
            with self._state:  # one step for readers: not running <=> a new start is accepted
                self._finish(*final, ending)
                self._process = self._stop = None
                self._job_lock.release()
            self.history.touch()
            if self.on_end is not None:
                self.on_end()

    def _supervise(self, worker: WorkerProcess) -> Outcome:
        """Apply the worker's events until one is final (or the worker dies); returns the outcome.
        The supervisor samples the machine's memory meanwhile, to explain a killed worker."""
        while True:
            try:
                event = worker.next_event(POLL_S)
            except WorkerExited as exited:
                if self._cancelled:
                    return Phase.stopped, cancelled_message(self._details.get("output_dir")), None
                return Phase.error, "The training worker stopped.", exited.reason
            final = None if event is None else self._handle(*event)
            if final is not None:
                return final

    def _estimate_early(self) -> None:
        """``eta_check_seconds`` in the details: the check's estimate from this machine's earlier
        runs (``preflight.timing.early_eta_logged``); nothing without such history."""
        if self.store is None or self._request is None:
            return
        from trainer_core.preflight.timing import early_eta_logged

        with self._state:
            details = dict(self._details)
        seconds = early_eta_logged(self._request, details, lambda: self.store.list_runs(limit=200))
        if seconds is not None:
            with self._state:
                self._details["eta_check_seconds"] = round(seconds, 1)

    def _handle(self, kind: str, payload: dict[str, Any]) -> Optional[Outcome]:
        """Apply one worker event; returns the outcome when it ends the job."""
        if self._cancelled:
            return None
        if kind == EventKind.PHASE:
            with self._state:
                self._details.pop("phase_progress", None)
                if self._clock is not None:
                    self._clock.phase_started_at = time.time()
            self._set(phase=Phase(payload["phase"]), message=payload["message"])
            self._record("set_phase", payload["phase"])
        elif kind == EventKind.PHASE_PROGRESS:
            with self._state:
                self._details["phase_progress"] = dict(payload)
            self.history.touch()
        elif kind == EventKind.INFO:
            with self._state:
                self._details.update(payload.get("details", {}))
            if "total_tokens" in payload.get("details", {}):
                self._estimate_early()
            self._set(message=payload["message"])
        elif kind == EventKind.PROGRESS:
            with self._state:
                progress = TrainingProgress(**payload)
                if self._clock is not None:
                    progress = self._clock.continued(progress)
                self.history.append(progress)
            if self.store is not None:
                self._store_call(self.store.add_metric, progress)
        elif kind == EventKind.DONE:
            if payload.get("stop_reason"):
                with self._state:
                    self._details["stop_reason"] = payload["stop_reason"]
            return Phase(payload["phase"]), payload["message"], None
        elif kind == EventKind.ERROR:
            return Phase.error, "Training failed.", payload["message"]
        return None

    def _settle(self, phase: Phase) -> tuple[EndReason, Settled]:
        """Why the job ended (a cancel ends ``stopped`` too, but as ``cancelled``; early stopping
        ends ``completed`` as ``early_stopped``) and what it left: ``run.json`` completed, the run's
        files recorded, the newest and the best checkpoint, the best eval loss."""
        with self._state:
            reason = end_reason(phase, self._cancelled, early_stopped="stop_reason" in self._details)
            output_dir, job_id, request = self._details.get("output_dir"), self._status.job_id, self._request
        return reason, settle_run(output_dir, job_id, request, reason, self.history.events())

    def _finish(self, phase: Phase, message: str, error: Optional[str], ending: tuple[EndReason, Settled]) -> None:
        """Record how the job ended (``_settle``'s result) in the details and the run history; then
        not running."""
        assert phase not in LIVE_PHASES
        reason, settled = ending
        with self._state:
            self._details["end_reason"] = reason.value
            if self._clock is not None:
                self._clock.end()
            paths = [str(p) if p else None for p in (settled.last_checkpoint, settled.best_checkpoint)]
            self._details.update(
                last_checkpoint=paths[0], best_checkpoint=paths[1], best_eval_loss=settled.best_eval_loss
            )
        self._record("finish_run", phase.value, error, paths[0], reason.value, paths[1], settled.best_eval_loss)
        self._set(phase=phase, message=message, error=error, is_training_running=False)

    def _record(self, method: str, *args: Any) -> None:
        """Write to the run history for the current job (if a store is attached)."""
        if self.store is not None and self._status.job_id:
            self._store_call(getattr(self.store, method), self._status.job_id, *args)

    @staticmethod
    def _store_call(fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except sqlite3.Error:  # a full disk must not kill the job thread; the live view goes on
            log.exception("could not write the run history")
