"""Answering one chat request for the OpenAI-compatible routes (``/v1`` and share links): a whole
``chat.completion``, or Server-Sent Events of ``chat.completion.chunk`` objects as OpenAI streams
them (the role first, content deltas, the finish reason, optionally the usage, then ``[DONE]``; a
failure after the first byte is sent as ``data: {"error": {...}}``).

The engine answers one request at a time and the others wait, each holding a worker thread; so
at most ``CHAT_SLOTS`` requests per door (API token, share links) may answer or wait at once, and
one more is told to retry (429). A client that goes away ends its generation: the engine's stream
is closed, which stops it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Optional

import anyio
from fastapi.responses import StreamingResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from api.openai_errors import OpenAIError, error_for
from api.openai_schemas import ChatCompletionRequest, Usage, chunk, completion, completion_id
from api.openai_tools import answer_parts, call_deltas
from api.remote_images import fetch_image
from trainer_core.serving.schemas import StreamEvent

CHAT_SLOTS = {"api": 8, "share": 4}  # requests answering or waiting for their turn, per door
RETRY_AFTER_S = 5


class ChatSlots:
    """A non-blocking count of chat requests in flight; ``take`` answers 429 when all are taken."""

    def __init__(self, limit: int) -> None:
        self._free = threading.BoundedSemaphore(limit)

    def take(self) -> None:
        """Hold a slot, or raise a 429 ``OpenAIError``."""
        if not self._free.acquire(blocking=False):
            raise OpenAIError(
                429,
                "too many chat requests at once: the model answers one at a time; try again in a few seconds",
                type="rate_limit_error",
                code="too_many_requests",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )

    def give(self) -> None:
        """Free a slot."""
        self._free.release()


def engine_of(request: Request) -> Any:
    """The app's chat engine (``app.state.engine``); 503 when the server has none."""
    engine = getattr(request.app.state, "engine", None)
    if engine is None:
        raise OpenAIError(503, "chat is not set up on this server", type="server_error")
    return engine


def answer(request: Request, body: ChatCompletionRequest, model_id: str, public: bool = False) -> Any:
    """Check ``body``, then answer with ``model_id``: a ``ChatCompletion``, or an SSE stream when
    ``body.stream``. Refusals before the first token keep their status (404, 400, 409, 503).
    ``public``: a share link's request (its own slots; no server paths in errors). Blocking: call
    it from a worker thread (a plain ``def`` route)."""
    engine = engine_of(request)
    body.check_supported()
    remote = request.app.state.settings.allow_remote_images and not public  # never for share links
    messages, settings = body.chat_messages(fetch_image if remote else None), body.generation_settings()
    tools, tool_choice = body.tool_settings()
    response_format = body.format_settings()
    parallel = body.parallel_tool_calls is not False
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return answered(
        request,
        public,
        lambda: engine.stream(
            model_id, messages, settings, tools=tools, tool_choice=tool_choice, response_format=response_format
        ),
        None if body.stream else lambda events: completion(model_id, whole(events), parallel),
        lambda events, first, error: sse_chunks(events, first, model_id, include_usage, error, parallel),
    )


def whole(events: Iterator[StreamEvent]) -> StreamEvent:
    """The last of ``events`` with every event's ``delta`` text joined into its ``delta``."""
    pieces, last = [], StreamEvent()
    for event in events:
        pieces.append(event.delta)
        last = event
    return last.model_copy(update={"delta": "".join(pieces)})


def answered(
    request: Request,
    public: bool,
    opened: Callable[[], Iterator[StreamEvent]],
    reply: Optional[Callable[[Iterator[StreamEvent]], Any]],
    chunks: Callable[[Iterator[StreamEvent], Optional[StreamEvent], Callable[[BaseException], OpenAIError]], Any],
) -> Any:
    """One answer within the door's slots (429 when all are taken): ``reply(opened())`` when
    ``reply`` is given, else a stream of ``chunks(events, first event, error)`` whose first event
    is taken before the 200 (the model loads and late refusals come there). Shared by the chat and
    the text completions."""
    slots: ChatSlots = request.app.state.chat_slots["share" if public else "api"]
    slots.take()
    streaming = False
    try:
        events = opened()
        if reply is not None:
            with contextlib.closing(events):
                return reply(events)
        try:
            first = next(events, None)
        except BaseException:
            events.close()
            raise
        streaming = True
    finally:
        if not streaming:
            slots.give()

    def cleanup() -> None:
        try:
            events.close()  # ends the generation if it is still running
        finally:
            slots.give()

    return ClosingStreamingResponse(
        chunks(events, first, lambda exc: error_for(request, exc, public)),
        cleanup,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def sse(data: dict[str, Any]) -> str:
    """One Server-Sent Event carrying ``data`` as JSON."""
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def relayed(events: Iterator[StreamEvent], first: Optional[StreamEvent]) -> AsyncIterator[StreamEvent]:
    """``first`` and the engine's next events up to the one with a finish reason, each ``next`` in a
    worker thread."""
    event = first
    while event is not None:
        yield event
        if event.finish_reason:
            return
        event = await anyio.to_thread.run_sync(next, events, None)


async def sse_chunks(
    events: Iterator[StreamEvent],
    first: Optional[StreamEvent],
    model_id: str,
    include_usage: bool,
    error: Callable[[BaseException], OpenAIError],
    parallel: bool = True,
) -> AsyncIterator[str]:
    """The engine's events (``first`` already taken) as ``chat.completion.chunk`` SSE lines; the
    last event's calls as ``tool_calls`` deltas (only the first unless ``parallel``)."""
    cid, created = completion_id(), int(time.time())
    yield sse(chunk(cid, created, model_id, {"role": "assistant", "content": ""}))
    event = None
    try:
        async for event in relayed(events, first):
            if event.delta:
                yield sse(chunk(cid, created, model_id, {"content": event.delta}))
    except Exception as exc:  # after the 200: the error travels in the stream, as OpenAI sends it
        yield sse(error(exc).body())
        return
    _, calls = answer_parts("", event and event.tool_calls, parallel)
    for delta in call_deltas(calls or []):
        yield sse(chunk(cid, created, model_id, delta))
    finish = "tool_calls" if calls else (event and event.finish_reason) or "stop"
    yield sse(chunk(cid, created, model_id, {}, finish_reason=finish))
    if include_usage:
        yield sse(chunk(cid, created, model_id, {}, usage=Usage.of(event or StreamEvent())))
    yield "data: [DONE]\n\n"


class ClosingStreamingResponse(StreamingResponse):
    """A ``StreamingResponse`` that, however sending ends (done, failed, the client gone), closes
    its body iterator and then runs ``cleanup`` in a worker thread."""

    def __init__(self, content: AsyncIterator[str], cleanup: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._cleanup = cleanup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
                await anyio.to_thread.run_sync(self._cleanup)
