"""The chat engine's one inference worker process and the model it holds: ``WorkerSlot``.

Loads a model into a fresh worker (``process.supervisor.WorkerProcess``: the studio's transformers
worker, or llama.cpp's for a GGUF file), sends it one command at a time and relays its events.
When the worker crashes or is killed, the request in flight gets a ``ChatUnavailable`` naming the
reason and the next load starts a new one. ``unload`` ends the worker at once and bumps the epoch:
a load or command of an older epoch is cut short (``preempted``). Locking: ``_lock`` guards the
fields and is never held while waiting for the worker; the caller (``engine.ChatEngine``) orders
loads and commands with its turns.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Optional

from trainer_core.process.supervisor import WorkerExited, WorkerProcess
from trainer_core.serving.errors import ChatInputError, ChatUnavailable
from trainer_core.serving.gguf_worker import serve_gguf
from trainer_core.serving.schemas import ModelChoice
from trainer_core.serving.worker import EventKind
from trainer_core.settings import Settings

log = logging.getLogger(__name__)
POLL_S = 0.1  # how often a waiting request checks the worker between events
ABANDON_S = 30.0  # how long an abandoned generation may take to stop before its worker is ended
OOM_HINT = "Chat with a smaller model, lower max_new_tokens, or free memory."


class WorkerSlot:
    """One inference worker at a time. ``target``: the transformers worker's function;
    ``refuse``: raises ChatUnavailable when the machine is taken (a training job) — called before
    each load; ``preempted``: the error for a load or command cut short by ``unload``."""

    def __init__(
        self,
        target: Callable[..., None],
        settings: Settings,
        refuse: Callable[[], None],
        preempted: Callable[[], ChatUnavailable],
    ) -> None:
        self._target, self._settings, self._refuse, self._preempted = target, settings, refuse, preempted
        self._lock = threading.Lock()  # guards the fields below
        self.worker: Optional[WorkerProcess] = None
        self._loaded: Optional[ModelChoice] = None
        self._loading: Optional[str] = None
        self._load_seconds: Optional[float] = None
        self._generating = False
        self._epoch = 0  # bumped by unload: loads and commands of an older epoch were cut short
        self._ids = itertools.count(1)

    def state(self) -> dict:
        """``{"loaded": id | None, "loading": id | None, "load_seconds": float | None}``."""
        with self._lock:
            loaded = self._loaded.id if self._loaded is not None else None
            return {"loaded": loaded, "loading": self._loading, "load_seconds": self._load_seconds}

    def stop_generation(self) -> bool:
        """Stop the command in progress at its next token; False when none runs."""
        with self._lock:
            if not self._generating or self.worker is None:
                return False
            self.worker.stop.set()
            return True

    def unload(self) -> None:
        """End the worker and forget the model at once; a command in progress ends with
        ChatUnavailable. Never waits."""
        with self._lock:
            worker, self.worker = self.worker, None
            self._loaded, self._loading, self._load_seconds = None, None, None
            self._epoch += 1
        if worker is not None:
            log.info("unloading the chat model")
            worker.stop.set()
            worker.terminate()

    def ensure_loaded(self, choice: ModelChoice) -> float:
        """Have ``choice`` loaded (the caller holds a turn); seconds spent loading (0.0 when it
        was). Raises ChatUnavailable (machine taken, worker died, unloaded meanwhile) or
        ChatInputError (the model could not be loaded from its files)."""
        self._refuse()
        with self._lock:
            if self._loaded == choice and self.worker is not None and self.worker.is_alive():
                return 0.0
            old, self.worker, self._loaded, self._load_seconds = self.worker, None, None, None
            epoch = self._epoch
        if old is not None:
            if not old.is_alive():
                log.warning("the chat worker had ended: %s", old.exit_reason())
            old.terminate()
        target, place = self._target, str(self._settings.models_dir)
        if choice.kind == "gguf":  # llama.cpp runs the file (``gguf_worker``)
            target, place = serve_gguf, str(self._settings.llama_cpp_dir)
        worker = WorkerProcess.create(
            target,
            (choice.model_dump(), place),
            name="chat-worker",
            commands=True,
            label="chat model's process",
            oom_hint=OOM_HINT,
        )
        with self._lock:
            if self._epoch != epoch:
                raise self._preempted()
            self.worker, self._loading = worker, choice.id
            worker.start()
        began = time.monotonic()
        try:
            kind, payload = self._next(worker, epoch)
            if kind != EventKind.LOADED:
                error = ChatInputError if payload.get("kind") == "load" else ChatUnavailable
                raise error(f"{choice.id}: {payload.get('message', 'the model could not be loaded')}")
        except BaseException:
            self._forget(worker)
            raise
        seconds = time.monotonic() - began
        with self._lock:
            if self._epoch != epoch:
                raise self._preempted()
            self._loaded, self._loading, self._load_seconds = choice, None, seconds
        log.info("chat model %s loaded in %.1f s (%s)", choice.id, seconds, payload.get("device"))
        return seconds

    def exchange(self, request: dict[str, Any]) -> Iterator[tuple[str, dict]]:
        """Send one command to the loaded worker and relay its ``delta`` events, then its ``done``
        (the caller holds a turn); its error event raised as ChatInputError (with its ``code`` and
        ``fields``) or ChatUnavailable. Closed early, it stops the command."""
        gen_id = next(self._ids)
        with self._lock:
            worker, epoch = self.worker, self._epoch
            if worker is None:
                raise ChatUnavailable("The chat model was unloaded; send again to load it.")
            worker.stop.clear()
            self._generating = True
        finished = False
        try:
            worker.send((gen_id, request))
            while True:
                kind, payload = self._next(worker, epoch)
                if payload.get("id") != gen_id:
                    continue
                if kind == EventKind.DELTA:
                    yield kind, payload
                    continue
                finished = True
                if kind == EventKind.DONE:
                    yield kind, payload
                    return
                if payload["kind"] in ("input", "load"):
                    raise ChatInputError(payload["message"], fields=payload.get("fields", ()), code=payload.get("code"))
                raise ChatUnavailable(payload["message"])
        finally:
            with self._lock:
                self._generating = False
            if not finished:
                self._abandon(worker, gen_id, epoch)

    def _forget(self, worker: WorkerProcess) -> None:
        """Drop ``worker`` (dead or failed) if it is still the current one, and end it."""
        with self._lock:
            if self.worker is worker:
                self.worker, self._loaded, self._loading, self._load_seconds = None, None, None, None
        worker.terminate()

    def _next(self, worker: WorkerProcess, epoch: int, deadline: float = float("inf")) -> Optional[tuple[str, dict]]:
        """The worker's next event (None once ``time.monotonic()`` passes ``deadline``);
        ChatUnavailable when the worker died (or was unloaded) meanwhile."""
        while time.monotonic() < deadline:
            try:
                event = worker.next_event(POLL_S)
            except WorkerExited as exited:
                self._forget(worker)
                if self._epoch != epoch:
                    raise self._preempted() from None
                raise ChatUnavailable(f"{exited.reason} Send again to load the model anew.") from None
            if event is not None:
                return event
        return None

    def _abandon(self, worker: WorkerProcess, gen_id: int, epoch: int) -> None:
        """A command whose reader left (or failed): stop it and wait for its end, so the next one
        starts clean; a worker that does not finish within ``ABANDON_S`` seconds is ended."""
        worker.stop.set()
        deadline = time.monotonic() + ABANDON_S
        while True:
            try:
                event = self._next(worker, epoch, deadline)
            except ChatUnavailable:
                return
            if event is None:
                break
            if event[1].get("id") == gen_id and event[0] in (EventKind.DONE, EventKind.ERROR):
                return
        log.warning("an abandoned generation did not stop within %.0f s; ending the chat worker", ABANDON_S)
        self._forget(worker)
