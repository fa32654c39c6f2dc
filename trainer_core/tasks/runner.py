"""Runs one background task at a time (export, evaluate, push, recipe) in a supervised worker process,
so the UI and the API stay responsive and a crash or out-of-memory kill costs only the task.

Training has the machine: a task is refused while a job runs, and a Start is refused while a task
runs (``JobRunner.start_refusal``). Starting a task unloads the chat model (``before_task``).
Each task writes only into its own new folder (``<run folder>/exports/<task id>``,
``<run folder>/evaluations/<task id>``, or ``<data dir>/evaluations/<task id>`` for the base
model); a task that fails with an error or is cancelled leaves nothing there. A check that does not
pass keeps the files, marked failed. The run's files list is updated so Delete removes them.

A data recipe run (``KEEPS_WHAT_WAS_MADE``) writes into the result folder it is given and keeps
what it made: Stop asks its worker to finish the requests in flight and write what it has (it ends
``cancelled`` with its result), killing it only after ``STOP_GRACE_S``; an error or a kill leaves
the records made so far in the folder, for a resume.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Optional

from trainer_core.process.supervisor import WorkerExited, WorkerProcess
from trainer_core.refusals import Refusal
from trainer_core.runs.folders import record_files
from trainer_core.runs.job import JobRunner
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import Settings
from trainer_core.tasks.schemas import FINAL_TASK_PHASES, TaskEvent, TaskKind, TaskPhase, TaskRecord
from trainer_core.tasks.store import TaskStore

log = logging.getLogger(__name__)
POLL_S = 0.2
SAVE_EVERY_S = 0.5
CANCEL_GRACE_S = 2.0
STOP_GRACE_S = 120.0  # a recipe run's requests in flight finish (a slow model) before its files are written
FOLDERS = {TaskKind.export: "exports", TaskKind.evaluate: "evaluations"}
KEEPS_WHAT_WAS_MADE = frozenset({TaskKind.recipe})


class TaskRefused(Refusal):
    """A task that cannot start now; ``status`` is the HTTP status that fits (409 busy, 400 bad
    input, 404 unknown model or task) and the message says why and what to do. Its code, unless
    given: ``busy`` (409), ``not_found`` (404), else ``task_refused``."""

    code = "task_refused"

    def __init__(
        self, message: str, status: int = 400, *, code: Optional[str] = None, fields: Iterable[str] = ()
    ) -> None:
        code = code or {409: "busy", 404: "not_found"}.get(status)
        super().__init__(message, fields=fields, code=code, status=status)


Target = Callable[..., None]  # target(request: dict, context: dict, events, stop)


class TaskRunner:
    """One task at a time; thread-safe. ``before_task`` (None or a callable without arguments) is
    called before a task's worker starts (the server unloads the chat model there)."""

    def __init__(self, jobs: JobRunner, settings: Settings, store: Optional[TaskStore] = None) -> None:
        self._jobs, self._settings = jobs, settings
        self.store = store or TaskStore(settings.db_path)
        self._lock = threading.Lock()
        self._current: Optional[TaskRecord] = None
        self._worker: Optional[WorkerProcess] = None
        self._cancelled = False
        self._thread: Optional[threading.Thread] = None
        self.before_task: Optional[Callable[[], None]] = None
        jobs.start_refusal = self.busy_message

    # ----- reads -----
    def busy_message(self) -> Optional[str]:
        """Why training may not start now (a task runs), or None. Reads without the lock: the job
        runner calls it under its own lock, and ``start`` takes the locks the other way round."""
        current = self._current
        if current is None:
            return None
        return (
            f"{current.kind.value} task {current.task_id} is running on {current.model}; "
            "wait for it to finish or cancel it in the Runs tab"
        )

    def get(self, task_id: str) -> Optional[TaskRecord]:
        """The live record of the running task, else the stored one (None: unknown)."""
        with self._lock:
            if self._current is not None and self._current.task_id == task_id:
                return self._current.model_copy(deep=True)
        return self.store.get(task_id)

    def current(self) -> Optional[TaskRecord]:
        """The running task, if any."""
        with self._lock:
            return None if self._current is None else self._current.model_copy(deep=True)

    def list(self, job_id: Optional[str] = None, kind: Optional[TaskKind] = None) -> list[TaskRecord]:
        """Stored tasks, newest first (the running one with its live progress)."""
        live = self.current()
        return [live if live is not None and r.task_id == live.task_id else r for r in self.store.list(job_id, kind)]

    def resolve(self, model_id: str) -> ModelChoice:
        """The model choice ``model_id`` names (``serving.choices``), confined to the allowed
        folders. Raises TaskRefused: 404 for an unknown id, 400 for a live run, a deleted folder or
        a run without weights (the message names the run and what to pick instead)."""
        from trainer_core.serving.choices import resolve_choice
        from trainer_core.serving.errors import ChatInputError, UnknownModel

        self._refuse_if_busy()
        try:
            return resolve_choice(model_id, self._jobs.store, self._settings)
        except UnknownModel as exc:
            raise TaskRefused(str(exc), 404, code=exc.code, fields=exc.fields) from None
        except ChatInputError as exc:
            raise TaskRefused(str(exc), 400, code=exc.code, fields=exc.fields) from None

    @property
    def run_store(self) -> Any:
        """The run history (``runs.store.RunStore``, or None)."""
        return self._jobs.store

    @property
    def settings(self) -> Settings:
        """The app's settings (allowed folders for dataset paths)."""
        return self._settings

    def run_record(self, job_id: str) -> Optional[Any]:
        """The run history's record of run ``job_id`` with its logged metrics (``RunDetail``), or None."""
        store = self._jobs.store
        return store.get_run(job_id) if store is not None else None

    # ----- commands -----
    def start(
        self,
        kind: TaskKind,
        choice: ModelChoice,
        request: dict[str, Any],
        target: Target,
        context: Optional[dict[str, Any]] = None,
        public_request: Optional[dict[str, Any]] = None,
        output_parent: Optional[Path] = None,
        output_dir: Optional[Path] = None,
    ) -> TaskRecord:
        """Start ``target`` for ``choice`` in a worker process and return the task's record at once.
        ``request`` goes to the worker (it may hold a token); ``public_request`` is what is stored
        (default: ``request``). The worker's ``context`` gets ``choice`` (a dict), ``models_dir``,
        ``output_dir`` and ``task_id`` added. ``output_dir``: the folder of a kind that is not in
        ``FOLDERS`` (a recipe's result folder; it may exist: a resume). Raises TaskRefused (409)
        while training or another task runs."""
        task_id = f"{kind.value}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        if kind in FOLDERS:
            parent = output_parent or (
                Path(choice.path).parent
                if choice.kind == "checkpoint"
                else Path(choice.path)
                if choice.path
                else self._settings.data_dir
            )
            output_dir = Path(parent) / FOLDERS[kind] / task_id
        record = TaskRecord(
            task_id=task_id,
            kind=kind,
            job_id=choice.job_id,
            model=choice.id,
            request=public_request if public_request is not None else request,
            message="Starting",
            output_dir=str(output_dir) if output_dir else None,
        )
        with self._lock, self._jobs.starts_held():  # no Start between the check and the claim
            self._refuse_if_busy()
            self._current, self._cancelled = record, False
        try:
            self.store.save(record)
            if self.before_task is not None:
                self.before_task()
            if output_dir is not None:
                Path(output_dir).mkdir(parents=True, exist_ok=kind in KEEPS_WHAT_WAS_MADE)
            ctx = {
                **(context or {}),
                "choice": choice.model_dump(),
                "models_dir": str(self._settings.models_dir),
                "output_dir": str(output_dir) if output_dir else None,
                "task_id": task_id,
            }
            worker = WorkerProcess.create(
                target,
                (request, ctx),
                name=task_id,
                label=f"{kind.value} worker",
                oom_hint="Free memory (stop the chat model) or export a smaller model.",
            )
            with self._lock:
                self._worker = worker
            worker.start()
        except BaseException as exc:
            self._end(TaskPhase.failed, error=f"the task could not start: {exc}")
            raise
        self._thread = threading.Thread(target=self._supervise, args=(worker,), name=task_id, daemon=True)
        self._thread.start()
        return record.model_copy(deep=True)

    def check_idle(self) -> None:
        """TaskRefused (409) while a training job or a task runs (for work done in the request, such
        as a recipe preview, that claims nothing)."""
        self._refuse_if_busy()

    def _refuse_if_busy(self) -> None:
        """TaskRefused (409) while a training job or another task runs."""
        if self._jobs.status(with_history=False).is_training_running:
            raise TaskRefused(
                "A training job is running; export, evaluate and push wait until it ends "
                "(stop it, or try again when it has finished).",
                409,
            )
        current = self._current
        if current is not None:
            raise TaskRefused(
                f"{current.kind.value} task {current.task_id} is still running; wait for it or cancel it first.", 409
            )

    def cancel(self, task_id: Optional[str] = None) -> bool:
        """Cancel the running task (``task_id`` must match when given); it ends ``cancelled`` within
        about two seconds and leaves no files; a recipe run stops and keeps what it made (see the
        module docstring). False when no such task runs."""
        with self._lock:
            if self._current is None or (task_id is not None and self._current.task_id != task_id):
                return False
            self._cancelled = True
            keeps = self._current.kind in KEEPS_WHAT_WAS_MADE
            self._current.message = "Stopping: finishing the requests in flight" if keeps else "Cancelling"
            worker = self._worker
        if worker is not None:
            worker.stop.set()
        return True

    def wait(self, timeout_s: Optional[float] = None) -> bool:
        """Block until the running task's thread ends; True when none runs."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return thread is None or not thread.is_alive()

    # ----- the task thread -----
    def _supervise(self, worker: WorkerProcess) -> None:
        final: tuple = (TaskPhase.failed, None, "the task ended without a result")
        saved, cancel_at = 0.0, None
        keeps = self._current is not None and self._current.kind in KEEPS_WHAT_WAS_MADE
        try:
            while True:
                if self._cancelled and cancel_at is None:
                    cancel_at = time.monotonic() + (STOP_GRACE_S if keeps else CANCEL_GRACE_S)
                if cancel_at is not None and time.monotonic() > cancel_at:
                    worker.terminate(0.5)
                try:
                    event = worker.next_event(POLL_S)
                except WorkerExited as exited:
                    final = (
                        (TaskPhase.cancelled, None, None)
                        if self._cancelled
                        else (TaskPhase.failed, None, exited.reason)
                    )
                    break
                if event is None:
                    continue
                kind, payload = event
                if kind == TaskEvent.PROGRESS:
                    with self._lock:
                        self._current.progress = max(0.0, min(1.0, float(payload.get("fraction", 0.0))))
                        if not self._cancelled:  # "Stopping" stays up while the requests in flight end
                            self._current.message = str(payload.get("message", ""))[:500]
                    if time.monotonic() - saved > SAVE_EVERY_S:
                        saved = time.monotonic()
                        self._save_current()
                elif kind == TaskEvent.RESULT:
                    phase = TaskPhase.failed if payload.get("passed") is False else TaskPhase.completed
                    if self._cancelled and keeps:  # stopped with what it made (or it had just finished)
                        final = (TaskPhase.cancelled if payload.get("stopped") else phase, payload, None)
                    elif self._cancelled:
                        final = (TaskPhase.cancelled, None, None)
                    else:
                        final = (phase, payload, None)
                    break
                elif kind == TaskEvent.ERROR:
                    final = (
                        (TaskPhase.cancelled, None, None)
                        if self._cancelled
                        else (TaskPhase.failed, None, payload.get("message"))
                    )
                    break
        except Exception as exc:  # noqa: BLE001 - the app must keep serving
            log.exception("task thread failed")
            final = (TaskPhase.failed, None, f"the task could not be supervised: {exc}")
        finally:
            worker.join(5)
            worker.terminate(0.5)
            self._end(*final)

    def _save_current(self) -> None:
        with self._lock:
            record = None if self._current is None else self._current.model_copy(deep=True)
        if record is not None:
            try:
                self.store.save(record)
            except Exception:  # noqa: BLE001 - a full disk must not end the task thread
                log.exception("could not save task %s", record.task_id)

    def _end(self, phase: TaskPhase, result: Optional[dict] = None, error: Optional[str] = None) -> None:
        """Record the outcome, clean up a failed or cancelled task's folder, and free the slot."""
        with self._lock:
            record, self._current, self._worker = self._current, None, None
        if record is None:
            return
        assert phase in FINAL_TASK_PHASES
        keeps = record.kind in KEEPS_WHAT_WAS_MADE
        message = {TaskPhase.completed: "Done", TaskPhase.cancelled: "Cancelled; nothing was kept"}.get(phase)
        if phase == TaskPhase.failed:
            message = "Finished, but the check did not pass" if result is not None else f"Failed: {error}"
        if keeps:
            message = _kept_message(phase, result, error, record.output_dir)
        elif result is None and record.output_dir:
            shutil.rmtree(record.output_dir, ignore_errors=True)
        record = record.model_copy(
            update={
                "phase": phase,
                "result": result,
                "error": error,
                "message": message,
                "finished_at": time.time(),
                "progress": 1.0 if phase == TaskPhase.completed else record.progress,
            }
        )
        self._record_run_files(record)
        try:
            self.store.save(record)
        except Exception:  # noqa: BLE001
            log.exception("could not save task %s", record.task_id)

    def _record_run_files(self, record: TaskRecord) -> None:
        """Add the task's files to its run's list, so deleting the run removes them."""
        if record.job_id is None or not record.output_dir or not Path(record.output_dir).exists():
            return
        run = self._jobs.store.get_run(record.job_id) if self._jobs.store is not None else None
        if run is not None:
            try:
                record_files(Path(run.output_dir), record.job_id, under=Path(record.output_dir))
            except OSError:
                log.exception("could not record the files of %s", record.task_id)


def _kept_message(phase: TaskPhase, result: Optional[dict], error: Optional[str], folder: Optional[str]) -> str:
    """The final message of a task that keeps what it made (a recipe run)."""
    counts = (result or {}).get("counts") or {}
    if result is not None and phase == TaskPhase.cancelled:
        return f"Stopped at {counts.get('made')} of {counts.get('records')}; the {counts.get('kept')} rows kept are written"
    if result is not None:
        return f"Done: {counts.get('kept')} rows kept of {counts.get('made')} made"
    where = f" in {Path(folder).name}" if folder else ""
    head = f"Failed: {error}" if phase == TaskPhase.failed else "Stopped"
    return f"{head}; the records made so far are kept{where} (resume to finish)"
