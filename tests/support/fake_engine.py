"""A chat engine with ``ChatEngine``'s interface and no model: it answers ``echo: <last user message>``
one word per token (with tools, a last message ``call NAME {json}`` is answered ``Sure.`` and that call
as a Hermes block, read by ``tools.parse`` as the worker reads it; ``calls N`` makes N calls),
continues a raw prompt with ``echo: <prompt>``, transcribes a clip as ``heard <characters of its data: URL>`` and speaks a
text as a tone of ``SPEECH_RATE`` / 10 samples a word (louder tuned than base), so route and
handler tests take milliseconds. Switches: ``busy`` (a training job runs), ``crash_after`` (fail
after that many tokens), ``token_delay_s`` (slow tokens, to test Stop)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Optional, Union

from trainer_core.serving.errors import TRAINING_BUSY, ChatInputError, ChatUnavailable, UnknownModel
from trainer_core.serving.schemas import (
    ChatMessage,
    GenerationSettings,
    ModelChoice,
    Speech,
    StreamEvent,
    Transcription,
)
from trainer_core.tools.parse import CallSplitter
from trainer_core.tools.render import call_text


def _answer_text(last: str) -> str:
    """The answer to ``last`` when tools are offered: ``call NAME {json}`` -> ``Sure.`` and that call;
    ``calls N`` -> N calls of ``get_time``; anything else its echo."""
    if last.startswith("call "):
        name, _, arguments = last[len("call ") :].partition(" ")
        return "Sure.\n" + f'<tool_call>\n{{"name": "{name}", "arguments": {arguments or "{}"}}}\n</tool_call>'
    if last.startswith("calls "):
        return "\n".join(call_text("get_time", {"n": n}) for n in range(int(last.split()[1])))
    return f"echo: {last}"


BASE = ModelChoice(id="base", label="Base model (tiny)", kind="base", base_model="tiny")
SPEECH_RATE = 24_000  # Hz of the fake speech (CSM's codec rate)


class FakeEngine:
    """``choices`` is ``base`` plus what ``add`` registered; ``calls`` records each generation and
    ``transcriptions`` each transcription (model id, clip, use_adapter), ``speeches`` each speech
    (model id, text, voice, use_adapter); a text over ``max_speech_chars`` is refused as too long."""

    def __init__(self) -> None:
        self.models: dict[str, ModelChoice] = {"base": BASE}
        self.no_weights: set[str] = set()
        self.busy = False
        self.crash_after: Optional[int] = None
        self.token_delay_s = 0.0
        self.max_prompt_chars = 10_000
        self.calls: list[tuple[str, list[ChatMessage], GenerationSettings]] = []
        self.tool_requests: list[tuple[Optional[list[dict]], str]] = []  # (tools, tool_choice) of each call
        self.prompts: list[tuple[str, str, GenerationSettings]] = []  # /v1/completions: (model id, prompt, settings)
        self._held: list[str] = []
        self.transcriptions: list[tuple[str, str, bool]] = []
        self.speeches: list[tuple[str, str, Union[int, str], bool]] = []
        self.max_speech_chars = 200
        self.loaded: Optional[str] = None
        self.closed = threading.Event()  # a stream's generator was closed before it finished
        self.finished = threading.Event()  # a stream ran to its end
        self._stop = threading.Event()

    def add(self, model_id: str, label: Optional[str] = None, serves: str = "chat") -> ModelChoice:
        """Register a run (``job_x``) or checkpoint (``job_x/checkpoint-N``) that ``serves`` chat,
        embeddings or transcriptions."""
        kind = "checkpoint" if "/" in model_id else "final"
        choice = ModelChoice(
            id=model_id,
            label=label or f"{model_id} (tiny)",
            kind=kind,
            base_model="tiny",
            path=f"/srv/data/runs/{model_id}",
            job_id=model_id.split("/")[0],
            adapter=True,
            created_at=1_700_000_000.5,
            serves=serves,
        )
        self.models[model_id] = choice
        return choice

    def reads_images(self, model_id: str) -> bool:
        """No fake model reads images (the Chat tab asks when a model is chosen)."""
        return False

    def reads_audio(self, model_id: str) -> bool:
        """No fake chat model hears audio (the Chat tab asks when a model is chosen)."""
        return False

    def refusal(self) -> Optional[str]:
        return TRAINING_BUSY if self.busy else None

    def choices(self) -> list[ModelChoice]:
        return list(self.models.values())

    def resolve(self, model_id: str) -> ModelChoice:
        if model_id in self.no_weights:
            raise ChatInputError(f"run {model_id}: its folder /srv/data/runs/{model_id} no longer exists (deleted)")
        if model_id not in self.models:
            raise UnknownModel(f"model {model_id!r}: no such model; use 'base', a run's job id or JOB_ID/checkpoint-N")
        return self.models[model_id]

    def load(self, model_id: str) -> float:
        self.resolve(model_id)
        self.loaded = model_id
        return 0.0

    def state(self) -> dict:
        return {"loaded": self.loaded, "loading": None, "load_seconds": None}

    def transcribe(self, model_id: str, audio: str, *how: Optional[str], use_adapter: bool = True) -> Transcription:
        """``ChatEngine.transcribe``'s checks; ``how``: the language and task (unused here)."""
        if self.busy:
            raise ChatUnavailable(TRAINING_BUSY)
        if self.resolve(model_id).serves != "transcriptions":
            raise ChatInputError(f"{model_id}: not a speech-to-text model", fields=("model",))
        self.transcriptions.append((model_id, audio, use_adapter))
        return Transcription(text=f"heard {len(audio)}", language=None, duration=1.0, tokens=3)

    def speak(self, model_id: str, text: str, voice: Union[int, str] = 0, use_adapter: bool = True) -> Speech:
        """``ChatEngine.speak``'s checks, and the worker's refusal of a text too long for the model."""
        import numpy as np

        if self.busy:
            raise ChatUnavailable(TRAINING_BUSY)
        if self.resolve(model_id).serves != "speech":
            raise ChatInputError(f"{model_id}: not a text-to-speech model", fields=("model",))
        if len(text) > self.max_speech_chars:
            raise ChatInputError(
                f"input: the text takes {len(text)} tokens, more than this model reads", fields=("input",)
            )
        self.speeches.append((model_id, text, voice, use_adapter))
        count = SPEECH_RATE // 10 * len(text.split())
        loudness = 0.5 if use_adapter else 0.25
        samples = (loudness * np.sin(np.arange(count) * 0.05)).astype(np.float32)
        return Speech(samples=samples, sampling_rate=SPEECH_RATE, seconds=count / SPEECH_RATE, frames=count // 1920)

    def stream(
        self,
        model_id: str,
        messages: list[ChatMessage],
        settings: GenerationSettings,
        use_adapter: bool = True,
        tools: Optional[list[dict]] = None,
        tool_choice: Union[str, dict] = "auto",
        response_format: Optional[dict] = None,
    ) -> Iterator[StreamEvent]:
        """Checks happen at the first ``next`` (like a generator engine); the tool and format
        settings are recorded (``tool_requests``) as the worker would get them."""
        if self.busy:
            raise ChatUnavailable(TRAINING_BUSY)
        self.resolve(model_id)
        if not messages or messages[-1].role not in ("user", "tool"):
            raise ChatInputError("messages: the last message must be the user's")
        prompt = sum(len(m.content) for m in messages)
        if prompt > self.max_prompt_chars:
            raise ChatInputError(f"the prompt has {prompt} tokens; this model reads at most {self.max_prompt_chars}")
        self.calls.append((model_id, messages, settings))
        self.tool_requests.append(
            (tools, tool_choice) if response_format is None else (tools, tool_choice, response_format)
        )
        text = _answer_text(messages[-1].content) if tools else f"echo: {messages[-1].content}"
        if not tools or tool_choice == "none":
            yield from self._words(text.split(" "), settings, prompt)
            return
        splitter = CallSplitter("hermes", self._held.append)
        for event in self._words(text.split(" "), settings, prompt, splitter.feed):
            if event.finish_reason:
                calls = splitter.finish()
                yield from self._flushed()
                yield event.model_copy(update={"tool_calls": calls or None})
                return
            yield from self._flushed()

    def stream_text(self, model_id: str, prompt: str, settings: GenerationSettings) -> Iterator[StreamEvent]:
        """``echo: <prompt>``, word by word; the checks of ``stream``."""
        if self.busy:
            raise ChatUnavailable(TRAINING_BUSY)
        self.resolve(model_id)
        self.prompts.append((model_id, prompt, settings))
        yield from self._words(f"echo: {prompt}".split(" "), settings, len(prompt))

    def _flushed(self) -> Iterator[StreamEvent]:
        held = list(self._held)
        self._held.clear()  # in place: the stream's splitter holds this very list
        for text in held:
            yield StreamEvent(delta=text)

    def _words(
        self,
        words: list[str],
        settings: GenerationSettings,
        prompt: int,
        into: Optional[Callable[[str], None]] = None,
    ) -> Iterator[StreamEvent]:
        """``words`` as deltas (or fed to ``into``, an empty event each), then the finish."""
        self._stop.clear()
        sent = 0
        try:
            for sent, word in enumerate(words[: settings.max_new_tokens], start=1):
                if self.crash_after is not None and sent > self.crash_after:
                    raise RuntimeError("worker died: Traceback (most recent call last) /srv/secret/path.py")
                if self._stop.is_set():
                    yield StreamEvent(finish_reason="cancelled", prompt_tokens=prompt, completion_tokens=sent - 1)
                    return
                time.sleep(self.token_delay_s)
                piece = word if sent == 1 else " " + word
                if into is not None:
                    into(piece)
                yield StreamEvent(delta="" if into is not None else piece)
            reason = "length" if len(words) > settings.max_new_tokens else "stop"
            yield StreamEvent(finish_reason=reason, prompt_tokens=prompt, completion_tokens=sent)
            self.finished.set()
        except GeneratorExit:
            self.closed.set()
            raise

    def complete(
        self,
        model_id: str,
        messages: list[ChatMessage],
        settings: GenerationSettings,
        use_adapter: bool = True,
        *tool_settings: Any,
    ) -> StreamEvent:
        text, last = "", StreamEvent()
        for event in self.stream(model_id, messages, settings, use_adapter, *tool_settings):
            text += event.delta
            last = event
        return StreamEvent(
            delta=text,
            finish_reason=last.finish_reason,
            prompt_tokens=last.prompt_tokens,
            completion_tokens=last.completion_tokens,
            tool_calls=last.tool_calls,
        )

    def stop_generation(self) -> bool:
        self._stop.set()
        return True
