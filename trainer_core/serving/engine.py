"""The chat engine in the app process: one model loaded at a time, in one inference worker process,
and one generation at a time (the others wait their turn, in order). Training has priority: chat
is refused while a job runs, and Start unloads the chat model first (``JobRunner.before_start``).

The worker and the model it holds are ``slot.WorkerSlot``'s (supervised like the training worker:
when it crashes or is killed, the request in flight gets a ``ChatUnavailable`` naming the reason and
the next request loads the model again); ``_turns`` orders loads and generations. Nothing here holds
a lock while waiting for the worker or calling the runner (``JobRunner.start`` calls ``unload`` under
its own lock).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional, Protocol, Union

from trainer_core.process.supervisor import WorkerProcess
from trainer_core.runs.job import JobRunner
from trainer_core.serving.choices import list_choices, resolve_choice
from trainer_core.serving.errors import TRAINING_BUSY, ChatInputError, ChatUnavailable, UnknownModel
from trainer_core.serving.gguf_worker import BASE_REFUSAL
from trainer_core.serving.inputs import checked_messages
from trainer_core.serving.one_answer import OneAnswerRequests, refuse_other
from trainer_core.serving.schemas import (
    ChatMessage,
    GenerationSettings,
    ModelChoice,
    StreamEvent,
)
from trainer_core.serving.slot import WorkerSlot
from trainer_core.serving.turns import Turns
from trainer_core.serving.worker import EventKind, serve
from trainer_core.settings import Settings

__all__ = ["ChatEngine", "ChatInputError", "ChatUnavailable", "UnknownModel"]
log = logging.getLogger(__name__)


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
        self._turns = Turns()
        self._slot = WorkerSlot(worker_target, settings, self._refuse_while_training, self._preempted)

    @property
    def _worker(self) -> Optional[WorkerProcess]:
        """The inference worker now (None when no model is loaded)."""
        return self._slot.worker

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
        return self._slot.state()

    # ----- commands -----
    def load(self, model_id: str) -> float:
        """Load ``model_id`` (unloading another model first), after any generation in progress.
        Returns the seconds spent loading (0.0 when already loaded). Raises ChatUnavailable (a
        training job runs, the worker died), ChatInputError or UnknownModel."""
        self._refuse_while_training()
        choice = self.resolve(model_id)
        with self._turns.turn():
            return self._slot.ensure_loaded(choice)

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
        return self._slot.stop_generation()

    def unload(self) -> None:
        """End the inference worker and forget the model at once; a generation in progress ends
        with ChatUnavailable. Never waits for a turn (``JobRunner.start`` calls it)."""
        self._slot.unload()

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
            self._slot.ensure_loaded(choice)
            with contextlib.closing(self._slot.exchange(request)) as events:
                return next(kind_payload for kind_payload in events if kind_payload[0] == EventKind.DONE)[1]

    def _preempted(self) -> ChatUnavailable:
        """The error for a load or generation cut short by ``unload``."""
        if self._runner.status(with_history=False).is_training_running:
            return ChatUnavailable(TRAINING_BUSY)
        return ChatUnavailable("The chat model was unloaded while in use; send again to load it.")

    # ----- generating -----
    def _stream(self, choice: ModelChoice, request: dict[str, Any]) -> Iterator[StreamEvent]:
        with self._turns.turn():
            self._slot.ensure_loaded(choice)
            yield from self._generate(request)

    def _generate(self, request: dict[str, Any]) -> Iterator[StreamEvent]:
        """Send one generation to the loaded worker and relay its events (the caller holds a turn)."""
        with contextlib.closing(self._slot.exchange(request)) as events:
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
