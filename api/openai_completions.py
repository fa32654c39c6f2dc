"""``POST /v1/completions``: OpenAI's older text completions, for the clients that still use them.

The prompt (a string, or a list of one string) is tokenized as it is, with no chat template
(``ChatEngine.stream_text``), and the model continues it. The answer is a ``text_completion`` with
``choices[0].text``, ``finish_reason`` and ``usage``, or with ``stream`` Server-Sent Events of
``text_completion`` chunks, then ``[DONE]``. The same token, share links and slots (429) as the chat
(``api.openai_answer.answered``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal, Optional, Union

from fastapi.requests import Request
from pydantic import BaseModel, Field

from api.openai_answer import answered, engine_of, relayed, sse, whole
from api.openai_errors import OpenAIError
from api.openai_schemas import FINISH_REASONS, SamplingRequest, Usage
from trainer_core.serving.schemas import MAX_MESSAGE_CHARS, StreamEvent


class CompletionRequest(SamplingRequest):
    """``POST /v1/completions``: ``prompt`` and the sampling settings (``echo``, ``suffix``,
    ``logprobs`` and ``best_of`` are ignored)."""

    prompt: Union[str, list[str]] = Field(description="The text to continue (a list of one text is accepted).")

    def prompt_text(self) -> str:
        """The one prompt; 400 naming ``prompt`` for an empty one, several, or one too long."""
        prompts = [self.prompt] if isinstance(self.prompt, str) else self.prompt
        if len(prompts) != 1:
            raise OpenAIError(
                400, "prompt: give one text (several prompts in one request are not supported)", param="prompt"
            )
        if not prompts[0]:
            raise OpenAIError(400, "prompt: give a non-empty text", param="prompt")
        if len(prompts[0]) > MAX_MESSAGE_CHARS:
            raise OpenAIError(400, f"prompt: at most {MAX_MESSAGE_CHARS:,} characters", param="prompt")
        return prompts[0]


class CompletionChoice(BaseModel):
    """The one choice."""

    index: int = 0
    text: str
    finish_reason: str
    logprobs: None = None


class TextCompletion(BaseModel):
    """A whole answer (``stream`` false)."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage


def text_answer(request: Request, body: CompletionRequest, model_id: str, public: bool = False) -> Any:
    """Check ``body``, then continue its prompt with ``model_id``: a ``TextCompletion``, or an SSE
    stream when ``body.stream`` (see ``api.openai_answer.answer``, whose rules this follows)."""
    engine = engine_of(request)
    body.check_supported()
    prompt, settings = body.prompt_text(), body.generation_settings()
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    cid, created = "cmpl-" + secrets.token_hex(12), int(time.time())

    def reply(events: Iterator[StreamEvent]) -> TextCompletion:
        event = whole(events)
        choice = CompletionChoice(text=event.delta, finish_reason=_finish(event))
        return TextCompletion(id=cid, created=created, model=model_id, choices=[choice], usage=Usage.of(event))

    return answered(
        request,
        public,
        lambda: engine.stream_text(model_id, prompt, settings),
        None if body.stream else reply,
        lambda events, first, error: text_chunks(events, first, (cid, created, model_id), include_usage, error),
    )


def _finish(event: Optional[StreamEvent]) -> str:
    return FINISH_REASONS.get((event and event.finish_reason) or "stop", "stop")


def text_chunk(head: tuple[str, int, str], text: str, finish_reason: Optional[str]) -> dict[str, Any]:
    """One ``text_completion`` chunk; ``head`` is (id, created, model)."""
    cid, created, model_id = head
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    return {"id": cid, "object": "text_completion", "created": created, "model": model_id, "choices": [choice]}


async def text_chunks(
    events: Iterator[StreamEvent],
    first: Optional[StreamEvent],
    head: tuple[str, int, str],
    include_usage: bool,
    error: Callable[[BaseException], OpenAIError],
) -> AsyncIterator[str]:
    """The engine's events as ``text_completion`` SSE chunks: the text pieces, a last chunk with the
    finish reason, with ``include_usage`` one with the usage and no choices, then ``[DONE]``."""
    event = None
    try:
        async for event in relayed(events, first):
            if event.delta:
                yield sse(text_chunk(head, event.delta, None))
    except Exception as exc:  # after the 200: the error travels in the stream
        yield sse(error(exc).body())
        return
    yield sse(text_chunk(head, "", _finish(event)))
    if include_usage:
        usage = Usage.of(event or StreamEvent()).model_dump()
        yield sse(text_chunk(head, "", None) | {"choices": [], "usage": usage})
    yield "data: [DONE]\n\n"
