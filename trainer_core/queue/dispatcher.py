"""The job queue's dispatcher: starts the next waiting job whenever the machine is free.

One daemon thread per app. It wakes when a job ends (``JobRunner.on_end``), when an entry is added
or moved, and every ``POLL_S`` seconds (an export or evaluation task that held the machine may have
ended meanwhile). Each start is checked again exactly as a Start is (``admission.admit``: paths,
access rules, data), because files and folders may have changed since the entry was queued. A
refused entry stays in the queue as ``refused`` with the reason and the next one is tried: a job
that cannot run never blocks the rest. ``POST /api/train/start`` is unchanged: refused while a job
runs, whatever is queued.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Optional

from pydantic import SecretStr, ValidationError

from trainer_core.admission.admit import REFUSALS, admit
from trainer_core.queue.store import QueueEntry, QueueState, QueueStore
from trainer_core.refusals import explain
from trainer_core.runs.job import JobRunner
from trainer_core.schemas import SECRET_FIELDS, TrainingStartRequest
from trainer_core.settings import Settings

log = logging.getLogger(__name__)
POLL_S = 2.0  # the dispatcher's look when nothing woke it (a finished export / evaluation task)
TOKEN_LOST = (
    "a token (hf_token / wandb_token) came with this job but tokens are kept in memory only and the app "
    "restarted since: remove it and add it again with the token"
)


class JobQueue:
    """Queued jobs over ``store``, started one at a time on ``runner``. ``admit_fn`` is
    ``admission.admit`` (replaceable in tests). Secrets (the Hugging Face token) stay in this
    object's memory, never in the store."""

    def __init__(
        self,
        runner: JobRunner,
        settings: Settings,
        store: QueueStore,
        admit_fn: Callable[..., TrainingStartRequest] = admit,
    ) -> None:
        self.runner, self.settings, self.store = runner, settings, store
        self._admit = admit_fn
        self._tokens: dict[str, dict[str, SecretStr]] = {}  # queue id -> its secrets (SECRET_FIELDS)
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._dispatch_lock = threading.Lock()  # one hand-over at a time
        self._thread: Optional[threading.Thread] = None

    # ----- what the API and the page call -----
    def add(self, request: TrainingStartRequest) -> QueueEntry:
        """Check ``request`` as a Start is checked and append it; it starts at once when the machine
        is free. Raises one of ``admission.REFUSALS`` (the message names the field) or
        ``store.QueueFull``."""
        checked = self._admit(request, self.settings, self.runner.store)
        secrets = {name: getattr(checked, name) for name in SECRET_FIELDS if getattr(checked, name) is not None}
        entry = self.store.add(checked.public_dict(), had_token=bool(secrets))
        if secrets:
            self._tokens[entry.queue_id] = secrets
        self.kick()
        return entry

    def entries(self) -> list[QueueEntry]:
        """Waiting entries in run order, then refused / interrupted ones."""
        return self.store.entries()

    def remove(self, queue_id: str) -> bool:
        """Take an entry out (any state but ``starting``); False when there is no such entry."""
        removed = self.store.remove(queue_id, unless=QueueState.starting)
        if removed:
            self._tokens.pop(queue_id, None)
        return removed

    def move(self, queue_id: str, position: int) -> Optional[QueueEntry]:
        """Put a waiting entry at ``position`` (1-based, clamped); None when it is not waiting."""
        return self.store.move(queue_id, position)

    def kick(self) -> None:
        """Ask the dispatcher to look now."""
        self._wake.set()

    # ----- the dispatcher thread -----
    def start(self) -> JobQueue:
        """Recover entries a dead process left half-started, hook the runner's job end (and tell its
        watchers when a queued job waits) and start the dispatcher thread. Returns self."""
        for entry in self.store.recover():
            log.info("queued job %s was being started when the app stopped; marked interrupted", entry.queue_id)
        self.runner.on_end = self.kick
        self.runner.more_queued = self.store.pending
        self._thread = threading.Thread(target=self._loop, name="job-queue", daemon=True)
        self._thread.start()
        self.kick()
        return self

    def close(self) -> None:
        """Stop the dispatcher thread (the queue stays in the store)."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(POLL_S)
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                while self.dispatch_once() == "next":
                    pass
            except Exception:  # noqa: BLE001 - the dispatcher must outlive any one entry
                log.exception("the job queue could not start its next job")

    def _busy(self) -> bool:
        if self.runner.status(with_history=False).is_training_running:
            return True
        refusal = self.runner.start_refusal
        return refusal is not None and refusal() is not None

    def dispatch_once(self) -> Optional[str]:
        """Start the first waiting entry if the machine is free. Returns the new job id, ``"next"``
        when that entry was refused (try the following one), or None (busy or nothing waiting)."""
        with self._dispatch_lock:
            entry = self.store.next_waiting()
            if entry is None or self._busy():
                return None
            if not self.store.claim(entry.queue_id):
                return "next"
            try:  # from here on the entry is ours: it ends started, waiting again or refused, never stuck
                return self._hand_over(entry)
            except Exception as exc:  # noqa: BLE001 - refused with the reason; the queue goes on
                log.exception("starting queued job %s failed", entry.queue_id)
                return self._refuse(entry, f"the job could not be started: {exc}")

    def _hand_over(self, entry: QueueEntry) -> Optional[str]:
        """Check a claimed entry again and start it; ``dispatch_once``'s answers."""
        try:
            self.runner.prewarm()  # a standby imports the training stack while the checks run
        except Exception:  # noqa: BLE001 - only a head start: the job can start without it
            log.exception("could not prewarm a worker for queued job %s", entry.queue_id)
        problem = None
        try:
            request = TrainingStartRequest(**entry.request, **self._tokens.get(entry.queue_id, {}))
            checked = self._admit(request, self.settings, self.runner.store)
        except ValidationError as exc:
            problem = explain(exc)
        except REFUSALS as exc:
            problem = str(exc)
        if problem is not None:
            return self._refuse(entry, problem)
        response = self.runner.start(checked)
        if response.status == "queued":
            self.store.remove(entry.queue_id)
            self._tokens.pop(entry.queue_id, None)
            log.info("queued job %s started as %s", entry.queue_id, response.job_id)
            return response.job_id
        if self._busy():  # someone's Start or a task won the machine meanwhile: keep the front place
            self.store.set_state(entry.queue_id, QueueState.waiting)
            return None
        return self._refuse(entry, response.error or response.message)

    def _refuse(self, entry: QueueEntry, problem: str) -> str:
        if entry.had_token and entry.queue_id not in self._tokens:
            problem = f"{problem} ({TOKEN_LOST})"
        log.info("queued job %s refused: %s", entry.queue_id, problem)
        self.store.set_state(entry.queue_id, QueueState.refused, problem)
        return "next"
