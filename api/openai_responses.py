"""``POST /v1/responses``: OpenAI's Responses API, as the Codex CLI and the OpenAI SDK use it.

The request (``api.openai_response_input``) becomes the chat's messages, tools and settings, and the
engine answers as for ``/v1/chat/completions`` (the same token, share links and slots: 429). The
answer is a ``response`` object whose ``output`` holds a ``message`` item (its text as one
``output_text`` part) and/or a ``function_call`` item per call the model made; ``status`` is
``completed``, or ``incomplete`` with ``incomplete_details.reason`` ``max_output_tokens``. With
``stream`` it comes as OpenAI's typed Server-Sent Events, each with its ``sequence_number``:
``response.created``, ``response.in_progress``, the text's item, part and ``output_text`` deltas, each
call's item and ``function_call_arguments`` events, then ``response.completed`` (or
``response.incomplete``); a failure after the first byte is an ``error`` event. ``text.format``
``json_object`` / ``json_schema`` constrains the text as the chat's ``response_format`` does. Nothing
is stored.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal, Optional

from fastapi.requests import Request
from pydantic import BaseModel, Field

from api.openai_answer import answered, engine_of, relayed, whole
from api.openai_errors import OpenAIError
from api.openai_response_input import ResponsesRequest
from api.openai_schemas import Usage
from api.openai_tools import answer_parts
from api.remote_images import fetch_image
from trainer_core.serving.schemas import StreamEvent


class ResponseUsage(BaseModel):
    """Token counts of one answer, in the Responses API's names."""

    input_tokens: int
    input_tokens_details: dict[str, int] = Field(default_factory=lambda: {"cached_tokens": 0, "cache_write_tokens": 0})
    output_tokens: int
    output_tokens_details: dict[str, int] = Field(default_factory=lambda: {"reasoning_tokens": 0})
    total_tokens: int

    @classmethod
    def of(cls, event: StreamEvent) -> ResponseUsage:
        """From the engine's last event."""
        usage = Usage.of(event)
        return cls(
            input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens, total_tokens=usage.total_tokens
        )


class ResponseObject(BaseModel):
    """A ``response`` (``output``: ``message`` and ``function_call`` items as OpenAI shapes them)."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["in_progress", "completed", "incomplete"]
    error: None = None
    incomplete_details: Optional[dict[str, str]] = None
    instructions: Optional[str] = None
    max_output_tokens: Optional[int] = None
    model: str
    output: list[dict[str, Any]] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: None = None
    store: bool = Field(False, description="Always false: nothing is stored.")
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    tool_choice: Any = "auto"
    tools: list[Any] = Field(default_factory=list)
    text: dict[str, Any] = Field(default_factory=lambda: {"format": {"type": "text"}})
    truncation: str = "disabled"
    metadata: dict[str, str] = Field(default_factory=dict)
    usage: Optional[ResponseUsage] = None


def respond(request: Request, body: ResponsesRequest, model_id: str, public: bool = False) -> Any:
    """Check ``body``, then answer with ``model_id``: a ``ResponseObject``, or typed SSE events when
    ``body.stream`` (the rules of ``api.openai_answer.answer``). Blocking: call it from a worker thread."""
    engine = engine_of(request)
    body.check_supported()
    remote = request.app.state.settings.allow_remote_images and not public
    messages, settings = body.chat_messages(fetch_image if remote else None), body.generation_settings()
    tools, tool_choice = body.tool_settings()
    response_format = body.format_settings()
    head = ResponseObject(
        id="resp_" + secrets.token_hex(16),
        created_at=int(time.time()),
        status="in_progress",
        instructions=body.instructions,
        max_output_tokens=body.max_output_tokens,
        model=model_id,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        temperature=settings.temperature,
        top_p=settings.top_p,
        tool_choice=body.tool_choice or tool_choice,
        tools=body.tools or [],
        text={"format": body.text["format"]} if response_format else {"format": {"type": "text"}},
    )
    return answered(
        request,
        public,
        lambda: engine.stream(
            model_id, messages, settings, tools=tools, tool_choice=tool_choice, response_format=response_format
        ),
        None if body.stream else lambda events: finished(head, whole(events)),
        lambda events, first, error: response_events(events, first, head, error),
    )


def finished(head: ResponseObject, event: StreamEvent, text: Optional[str] = None) -> ResponseObject:
    """``head`` completed by the engine's last event (``event.delta``: the whole text, unless ``text``
    gives the streamed one): its output items, status and usage."""
    content, calls = answer_parts(event.delta, event.tool_calls, head.parallel_tool_calls)
    output = []
    if (text if text is not None else content) or not calls:
        output.append(message_item(head.id, text if text is not None else content or "", "completed"))
    output.extend(call_item(call, "completed") for call in calls or [])
    cut = event.finish_reason == "length" and not calls
    return head.model_copy(
        update={
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "output": output,
            "usage": ResponseUsage.of(event),
        }
    )


def message_item(response_id: str, text: Optional[str], status: str) -> dict[str, Any]:
    """The ``message`` output item (one ``output_text`` part unless ``text`` is None: none yet)."""
    parts = [] if text is None else [text_part(text)]
    item_id = "msg_" + response_id.removeprefix("resp_")
    return {"type": "message", "id": item_id, "role": "assistant", "status": status, "content": parts}


def text_part(text: str) -> dict[str, Any]:
    """An ``output_text`` content part."""
    return {"type": "output_text", "text": text, "annotations": []}


def call_item(call: dict[str, Any], status: str, arguments: Optional[str] = None) -> dict[str, Any]:
    """A ``function_call`` output item of a chat ``tool_calls`` entry (``arguments`` instead of its own)."""
    function = call["function"]
    return {
        "type": "function_call",
        "id": "fc_" + call["id"].removeprefix("call_"),
        "call_id": call["id"],
        "name": function["name"],
        "arguments": function["arguments"] if arguments is None else arguments,
        "status": status,
    }


class Events:
    """Typed SSE events with their ``sequence_number``, counted from 0."""

    def __init__(self) -> None:
        self.number = -1

    def __call__(self, kind: str, **fields: Any) -> str:
        """One event of type ``kind`` (``event:`` and ``data:`` lines, as OpenAI sends them)."""
        self.number += 1
        data = {"type": kind, "sequence_number": self.number} | fields
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def response_events(
    events: Iterator[StreamEvent],
    first: Optional[StreamEvent],
    head: ResponseObject,
    error: Callable[[BaseException], OpenAIError],
) -> AsyncIterator[str]:
    """The engine's events (``first`` already taken) as the Responses API's stream: the text's message
    item as it comes, then each call's item, then ``response.completed`` or ``response.incomplete``."""
    event, say, pieces = None, Events(), []
    yield say("response.created", response=head.model_dump())
    yield say("response.in_progress", response=head.model_dump())
    message = message_item(head.id, None, "in_progress")
    where = {"item_id": message["id"], "output_index": 0}
    try:
        async for event in relayed(events, first):
            if event.delta and not pieces:
                yield say("response.output_item.added", output_index=0, item=message)
                yield say("response.content_part.added", **where, content_index=0, part=text_part(""))
            if event.delta:
                pieces.append(event.delta)
                yield say("response.output_text.delta", **where, content_index=0, delta=event.delta, logprobs=[])
    except Exception as exc:  # after the 200: the error travels in the stream, as OpenAI sends it
        body = error(exc).body()["error"]
        yield say("error", code=body["code"], message=body["message"], param=body["param"])
        return
    last = event or StreamEvent()
    done = finished(head, last, "".join(pieces) if pieces else None)
    for chunk in _closing(say, done, bool(pieces)):
        yield chunk
    kind = "response.incomplete" if done.status == "incomplete" else "response.completed"
    yield say(kind, response=done.model_dump())


def _closing(say: Events, done: ResponseObject, opened: bool) -> Iterator[str]:
    """The events that close the text's item (opening it first when the answer had no text and no
    calls) and carry each call's item: added, arguments delta and done, item done."""
    for index, item in enumerate(done.output):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            where = {"item_id": item["id"], "output_index": index}
            if not opened:
                yield say("response.output_item.added", output_index=index, item=item | {"content": []})
                yield say("response.content_part.added", **where, content_index=0, part=text_part(""))
            yield say("response.output_text.done", **where, content_index=0, text=text, logprobs=[])
            yield say("response.content_part.done", **where, content_index=0, part=text_part(text))
        else:
            where = {"item_id": item["id"], "output_index": index}
            yield say(
                "response.output_item.added", output_index=index, item=item | {"arguments": "", "status": "in_progress"}
            )
            yield say("response.function_call_arguments.delta", **where, delta=item["arguments"])
            yield say("response.function_call_arguments.done", **where, arguments=item["arguments"])
        yield say("response.output_item.done", output_index=index, item=item)
