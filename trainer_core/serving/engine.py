"""The chat engine in the app process: one model loaded at a time, in one inference worker process,
and one generation at a time (the others wait their turn, in order). Training has priority: chat
is refused while a job runs, and Start unloads the chat model first (``JobRunner.before_start``).

The worker is supervised like the training worker (``process.supervisor``): when it crashes or is
killed, the request in flight gets a ``ChatUnavailable`` naming the reason (``exit_reason``) and the
next request loads the model again. Locking: ``_lock`` guards the fields and is never held while
waiting for the worker or calling the runner (``JobRunner.start`` calls ``unload`` under its own
lock); ``_turns`` orders loads and generations.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional, Protocol, Union

from trainer_core.process.supervisor import WorkerExited, WorkerProcess
from trainer_core.runs.job import JobRunner
from trainer_core.serving.choices import list_choices, resolve_choice
from trainer_core.serving.errors import TRAINING_BUSY, ChatInputError, ChatUnavailable, UnknownModel
from trainer_core.serving.gguf_worker import BASE_REFUSAL, serve_gguf
from trainer_core.serving.inputs import checked_messages
from trainer_core.serving.one_answer import OneAnswerRequests, refuse_other
from trainer_core.serving.schemas import (
    ChatMessage,
    GenerationSettings,
    ModelChoice,
    StreamEvent,
)
from trainer_core.serving.turns import Turns
from trainer_core.serving.worker import EventKind, serve
from trainer_core.settings import Settings

__all__ = ["ChatEngine", "ChatInputError", "ChatUnavailable", "UnknownModel"]
log = logging.getLogger(__name__)
POLL_S = 0.1  # how often a waiting request checks the worker between events
ABANDON_S = 30.0  # how long an abandoned generation may take to stop before its worker is ended
OOM_HINT = "Chat with a smaller model, lower max_new_tokens, or free memory."


class ModelSource(Protocol):
    """More things to talk to beside the runs (``tasks.export_models.ExportModels``: exported GGUF
    files and merged models), asked for the ids it ``owns``."""

    def owns(self, model_id: str) -> bool: ...

    def list(self) -> list[ModelChoice]: ...

    def resolve(self, model_id: str) -> ModelChoice: ...


class ChatEngine(OneAnswerRequests):
    """Loads models into an inference worker and streams answers (and, by ``OneAnswerRequests``,
    embeds, transcribes and speaks); shared by the chat tab, the OpenAI-compatible routes and share
    links. ``models``: more choices than the runs (the app passes the exports' GGUF files). Every
    method is thread-safe."""

    def __init__(
        self,
        runner: JobRunner,
        settings: Settings,
        worker_target: Callable[..., None] = serve,
        models: Optional[ModelSource] = None,
    ) -> None:
        self._runner, self._settings, self._target, self._models = runner, settings, worker_target, models
        self._lock = threading.Lock()  # guards the fields below
        self._turns = Turns()
        self._worker: Optional[WorkerProcess] = None
        self._loaded: Optional[ModelChoice] = None
        self._loading: Optional[str] = None
        self._load_seconds: Optional[float] = None
        self._generating = False
        self._epoch = 0  # bumped by unload: loads and generations of an older epoch were cut short
        self._ids = itertools.count(1)

    # ----- reads -----
    def choices(self) -> list[ModelChoice]:
        """``base``, then each run's final weights and checkpoints, newest first (see ``choices``),
        then those of ``models`` (the exports' GGUF files, newest first)."""
        runs = list_choices(self._runner.store, self._settings)
        return [*runs, *(self._models.list() if self._models is not None else [])]

    def reads_images(self, model_id: str) -> bool:
        """True when ``model_id`` is the base, run or checkpoint of a model kind that reads images
        (``reads``)."""
        return self.reads(model_id, "image")

    def reads_audio(self, model_id: str) -> bool:
        """True when ``model_id`` is the base, run or checkpoint of a model kind that hears audio
        clips: an audio-in chat model or a speech-to-text model (``reads``)."""
        return self.reads(model_id, "audio")

    def reads(self, model_id: str, medium: str) -> bool:
        """True when ``model_id`` is the base, run or checkpoint of a model kind whose rows carry
        ``medium`` ("image", "audio": ``ModelKind.media``, from its config where it is on this
        machine: ``data.local_kind``); False for text-only models, GGUF files (their projector is
        not served) and unknown ids."""
        from trainer_core.data.local_kind import named_kind
        from trainer_core.model_kind import kind_for_folder

        try:
            choice = self.resolve(model_id)
        except ChatInputError:
            return False
        if choice.kind == "gguf":
            return False
        if choice.path and not choice.adapter and (Path(choice.path) / "config.json").is_file():
            return medium in kind_for_folder(Path(choice.path)).media
        return medium in named_kind(choice.base_model, self._settings).media

    def resolve(self, model_id: str) -> ModelChoice:
        """The choice ``model_id`` names; raises UnknownModel or ChatInputError (see ``choices``)."""
        if self._models is not None and self._models.owns(model_id):
            return self._models.resolve(model_id)
        return resolve_choice(model_id, self._runner.store, self._settings)

    def state(self) -> dict:
        """``{"loaded": id | None, "loading": id | None, "load_seconds": float | None}``."""
        with self._lock:
            loaded = self._loaded.id if self._loaded is not None else None
            return {"loaded": loaded, "loading": self._loading, "load_seconds": self._load_seconds}

    # ----- commands -----
    def load(self, model_id: str) -> float:
        """Load ``model_id`` (unloading another model first), after any generation in progress.
        Returns the seconds spent loading (0.0 when already loaded). Raises ChatUnavailable (a
        training job runs, the worker died), ChatInputError or UnknownModel."""
        self._refuse_while_training()
        choice = self.resolve(model_id)
        with self._turns.turn():
            return self._ensure_loaded(choice)

    def stream(
        self,
        model_id: str,
        messages: list[ChatMessage],
        settings: GenerationSettings,
        use_adapter: bool = True,
        tools: Optional[list[dict[str, Any]]] = None,
        tool_choice: Union[str, dict[str, Any]] = "auto",
        response_format: Optional[dict[str, Any]] = None,
    ) -> Iterator[StreamEvent]:
        """Answer ``messages`` piece by piece: events with ``delta`` text, the last one with
        ``finish_reason`` and token counts. Loads the model on demand and waits for its turn. With
        ``use_adapter=False`` a run's base model answers (same weights, adapter disabled); ignored
        for ``base``. ``tools`` (``tools.definitions.tool_list`` form) go to the chat template; unless
        ``tool_choice`` is ``none`` the answer's calls come on the last event (``tool_calls``), their
        text held back; ``required`` or a named function forces one call, ``response_format``
        (``json_object`` / ``json_schema``) a JSON answer (``serving.constraints``). Checks that need no model (training running, unknown id, bad messages) raise
        here at once; the rest while iterating. Closing the iterator early stops the generation."""
        choice = self._chat_choice(model_id, use_adapter)
        request = {
            "messages": checked_messages(messages),
            "settings": settings.model_dump(),
            "use_adapter": use_adapter,
        }
        if tools:
            request |= {"tools": tools, "tool_choice": tool_choice}
        if response_format:
            request["response_format"] = response_format
        return self._stream(choice, request)

    def stream_text(self, model_id: str, prompt: str, settings: GenerationSettings) -> Iterator[StreamEvent]:
        """``stream`` for a raw ``prompt`` (no chat template: ``POST /v1/completions``)."""
        choice = self._chat_choice(model_id, True)
        if not prompt:
            raise ChatInputError("prompt: give a non-empty text", fields=("prompt",))
        return self._stream(choice, {"prompt": prompt, "settings": settings.model_dump()})

    def _chat_choice(self, model_id: str, use_adapter: bool) -> ModelChoice:
        """The chat model ``model_id``; ChatUnavailable while training, ChatInputError for a model
        that serves something else (or a GGUF asked for its base), UnknownModel."""
        self._refuse_while_training()
        choice = self.resolve(model_id)
        if choice.serves == "transcriptions":
            raise ChatInputError(
                f"{model_id}: a speech-to-text model: it answers transcriptions (POST /v1/audio/transcriptions), "
                "not chat; choose a chat model",
                fields=("model",),
                code="speech_to_text_model",
            )
        if choice.serves == "speech":
            raise ChatInputError(
                f"{model_id}: a text-to-speech model: it answers speech (POST /v1/audio/speech), not chat; choose a "
                "chat model",
                fields=("model",),
                code="text_to_speech_model",
            )
        if choice.serves != "chat":
            raise ChatInputError(
                f"{model_id}: an embedding model: it answers embeddings (POST /v1/embeddings, the Search "
                "playground), not chat; choose a chat model",
                fields=("model",),
                code="embedding_model",
            )
        if choice.kind == "gguf" and not use_adapter:
            raise ChatInputError(f"{model_id}: {BASE_REFUSAL}")
        return choice

    def complete(
        self,
        model_id: str,
        messages: list[ChatMessage],
        settings: GenerationSettings,
        use_adapter: bool = True,
        tools: Optional[list[dict[str, Any]]] = None,
        tool_choice: Union[str, dict[str, Any]] = "auto",
        response_format: Optional[dict[str, Any]] = None,
    ) -> StreamEvent:
        """The whole answer in ``delta``, with ``finish_reason``, token counts and calls (see ``stream``)."""
        pieces, last = [], StreamEvent()
        for event in self.stream(model_id, messages, settings, use_adapter, tools, tool_choice, response_format):
            pieces.append(event.delta)
            last = event
        return last.model_copy(update={"delta": "".join(pieces)})

    def stop_generation(self) -> bool:
        """Stop the generation in progress at its next token (it ends with ``cancelled``); False
        when none runs."""
        with self._lock:
            if not self._generating or self._worker is None:
                return False
            self._worker.stop.set()
            return True

    def unload(self) -> None:
        """End the inference worker and forget the model at once; a generation in progress ends
        with ChatUnavailable. Never waits for a turn (``JobRunner.start`` calls it)."""
        with self._lock:
            worker, self._worker = self._worker, None
            self._loaded, self._loading, self._load_seconds = None, None, None
            self._epoch += 1
        if worker is not None:
            log.info("unloading the chat model")
            worker.stop.set()
            worker.terminate()

    # ----- loading -----
    def refusal(self) -> Optional[str]:
        """Why chat cannot run now (a training job has the machine), or None."""
        return TRAINING_BUSY if self._runner.status(with_history=False).is_training_running else None

    def _refuse_while_training(self, message: str = TRAINING_BUSY) -> None:
        """Raise ChatUnavailable(``message``) while a training job runs."""
        if self.refusal():
            raise ChatUnavailable(message)

    def _served(self, model_id: str, serves: str, busy: str = TRAINING_BUSY) -> ModelChoice:
        """The choice ``model_id`` names, refused while a job trains (``busy``: the message) and
        unless it serves ``serves`` (``one_answer.refuse_other``)."""
        self._refuse_while_training(busy)
        choice = self.resolve(model_id)
        refuse_other(model_id, choice, serves)
        return choice

    def _ask(self, choice: ModelChoice, request: dict[str, Any]) -> dict:
        """The worker's ``done`` payload for one ``request`` to ``choice`` (loaded on demand, in its
        turn)."""
        with self._turns.turn():
            self._ensure_loaded(choice)
            with contextlib.closing(self._exchange(request)) as events:
                return next(kind_payload for kind_payload in events if kind_payload[0] == EventKind.DONE)[1]

    def _ensure_loaded(self, choice: ModelChoice) -> float:
        """Have ``choice`` loaded (the caller holds a turn); seconds spent loading."""
        self._refuse_while_training()
        with self._lock:
            if self._loaded == choice and self._worker is not None and self._worker.is_alive():
                return 0.0
            old, self._worker, self._loaded, self._load_seconds = self._worker, None, None, None
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
            self._worker, self._loading = worker, choice.id
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

    def _forget(self, worker: WorkerProcess) -> None:
        """Drop ``worker`` (dead or failed) if it is still the current one, and end it."""
        with self._lock:
            if self._worker is worker:
                self._worker, self._loaded, self._loading, self._load_seconds = None, None, None, None
        worker.terminate()

    def _preempted(self) -> ChatUnavailable:
        """The error for a load or generation cut short by ``unload``."""
        if self._runner.status(with_history=False).is_training_running:
            return ChatUnavailable(TRAINING_BUSY)
        return ChatUnavailable("The chat model was unloaded while in use; send again to load it.")

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

    # ----- generating -----
    def _stream(self, choice: ModelChoice, request: dict[str, Any]) -> Iterator[StreamEvent]:
        with self._turns.turn():
            self._ensure_loaded(choice)
            yield from self._generate(request)

    def _generate(self, request: dict[str, Any]) -> Iterator[StreamEvent]:
        """Send one generation to the loaded worker and relay its events (the caller holds a turn)."""
        with contextlib.closing(self._exchange(request)) as events:
            for kind, payload in events:
                if kind == EventKind.DELTA:
                    yield StreamEvent(delta=payload["text"])
                    continue
                yield StreamEvent(
                    finish_reason=payload["finish_reason"],
                    prompt_tokens=payload["prompt_tokens"],
                    completion_tokens=payload["completion_tokens"],
                    tool_calls=payload.get("tool_calls"),
                )
                return

    def _exchange(self, request: dict[str, Any]) -> Iterator[tuple[str, dict]]:
        """Send one command to the loaded worker and relay its ``delta`` events, then its ``done``
        (the caller holds a turn); its error event raised as ChatInputError (with its ``code`` and
        ``fields``) or ChatUnavailable. Closed early, it stops the command."""
        gen_id = next(self._ids)
        with self._lock:
            worker, epoch = self._worker, self._epoch
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

    def _abandon(self, worker: WorkerProcess, gen_id: int, epoch: int) -> None:
        """A generation whose reader left (or failed): stop it and wait for its end, so the next
        one starts clean; a worker that does not finish within ``ABANDON_S`` seconds is ended."""
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
