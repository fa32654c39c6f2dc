"""Request and answer bodies of the OpenAI-compatible chat API, and their mapping to ours.

Requests follow OpenAI's ``POST /v1/chat/completions`` (its messages: ``api.openai_messages``; its
tools: ``api.openai_tools``); fields we do not know are ignored, as OpenAI
clients expect. ``max_tokens`` / ``max_completion_tokens`` become ``max_new_tokens``; ``top_k`` and
``repetition_penalty`` are extras. Bounds and defaults come from ``GenerationSettings`` (one source).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.openai_errors import OpenAIError
from api.openai_messages import RequestMessage, chat_messages
from api.openai_tools import answer_parts, format_settings, request_tools
from trainer_core.serving.schemas import ChatMessage, GenerationSettings, ModelChoice, StreamEvent
from trainer_core.vocabulary import OptionalWholeNumber

MAX_MESSAGES = 1000
FINISH_REASONS = {"stop": "stop", "length": "length", "cancelled": "stop"}  # OpenAI has no "cancelled"


class StreamOptions(BaseModel):
    """``include_usage``: send a last chunk with the token counts."""

    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class SamplingRequest(BaseModel):
    """What ``POST /v1/chat/completions`` and ``POST /v1/completions`` share: the model and the
    sampling settings. Unknown fields are ignored; ``n`` > 1 and ``stop`` are refused."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    model: Optional[str] = Field(
        None, max_length=300, description="`base`, a job id or `JOB_ID/checkpoint-N` (GET /v1/models)."
    )
    max_tokens: OptionalWholeNumber = Field(None, description="Longest answer in tokens (max_new_tokens).")
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    top_k: OptionalWholeNumber = Field(None, description="Extra: keep only the top_k likeliest tokens; 0 = no limit.")
    repetition_penalty: Optional[float] = Field(None, description="Extra: above 1 discourages repeating tokens.")
    seed: OptionalWholeNumber = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    n: OptionalWholeNumber = Field(None, description="Only 1 is supported.")
    stop: Union[str, list[str], None] = Field(None, description="Not supported; send none.")
    max_completion_tokens: OptionalWholeNumber = Field(None, exclude=True)  # a chat request's newer name

    def check_supported(self) -> None:
        """Refuse what we would otherwise get silently wrong."""
        if self.n not in (None, 1):
            raise OpenAIError(400, "n: only n=1 is supported; send separate requests for several answers", param="n")
        if self.stop:
            raise OpenAIError(
                400,
                "stop: stop sequences are not supported; the answer ends at the model's "
                "end-of-turn token or max_tokens",
                param="stop",
            )

    def generation_settings(self) -> GenerationSettings:
        """Our ``GenerationSettings`` (defaults for what is not sent); 400 naming the field."""
        length_name = "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"
        names = {"max_new_tokens": length_name}
        values = {
            "max_new_tokens": self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "repetition_penalty": self.repetition_penalty,
            "seed": self.seed,
        }
        try:
            return GenerationSettings(**{k: v for k, v in values.items() if v is not None})
        except ValidationError as exc:
            error = exc.errors()[0]
            field = str(error["loc"][0]) if error.get("loc") else ""
            param = names.get(field, field)
            raise OpenAIError(400, f"{param}: {error['msg']}", param=param) from None


class ChatCompletionRequest(SamplingRequest):
    """``POST /v1/chat/completions``: ``messages``, and function ``tools`` (``api.openai_tools``)."""

    messages: list[RequestMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_completion_tokens: OptionalWholeNumber = Field(None, description="Longest answer in tokens (max_new_tokens).")
    tools: Optional[list[Any]] = Field(
        None, description="Function tools (OpenAI's form), rendered by the model's chat template."
    )
    tool_choice: Union[str, dict[str, Any], None] = Field(
        None,
        description="`auto` (the default with tools), `none`, `required` or a named function "
        '(`{"type": "function", "function": {"name": ...}}`): a forced call is written by constrained decoding.',
    )
    parallel_tool_calls: Optional[bool] = Field(None, description="false: only the answer's first call is kept.")
    response_format: Optional[dict[str, Any]] = Field(
        None, description="`json_object` or `json_schema` (structured outputs, by constrained decoding); `text`."
    )

    def tool_settings(self) -> tuple[list[dict[str, Any]], Union[str, dict[str, Any]]]:
        """(the tools in ``tool_list`` form, the tool choice); 400 naming the bad field."""
        return request_tools(self.tools, self.tool_choice)

    def format_settings(self) -> Optional[dict[str, Any]]:
        """``response_format`` checked, None for free text; 400 naming the bad field."""
        return format_settings(self.response_format)

    def chat_messages(self, fetch: Optional[Callable[[str], str]] = None) -> list[ChatMessage]:
        """Our ``ChatMessage`` list (``api.openai_messages.chat_messages``)."""
        return chat_messages(self.messages, fetch)


# ----- answers -----
class ModelObject(BaseModel):
    """One entry of ``GET /v1/models``."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "finetune-studio"
    serves: Literal["chat", "embeddings", "transcriptions", "speech"] = Field(
        "chat",
        description="Extra: chat (POST /v1/chat/completions), embeddings (POST /v1/embeddings), transcriptions "
        "(POST /v1/audio/transcriptions) or speech (POST /v1/audio/speech).",
    )

    @classmethod
    def of(cls, choice: ModelChoice) -> ModelObject:
        """From an engine choice (``created`` is its run's start, 0 for the base model)."""
        return cls(id=choice.id, created=int(choice.created_at or 0), serves=choice.serves)


class ModelList(BaseModel):
    """``GET /v1/models``."""

    object: Literal["list"] = "list"
    data: list[ModelObject]


class Usage(BaseModel):
    """Token counts of one answer."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, event: StreamEvent) -> Usage:
        """From the engine's last event."""
        prompt, completion = event.prompt_tokens or 0, event.completion_tokens or 0
        return cls(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


class AssistantMessage(BaseModel):
    """The answer: its text (None when it is only calls) and its calls (left out when none)."""

    role: Literal["assistant"] = "assistant"
    content: Optional[str]
    tool_calls: Optional[list[dict[str, Any]]] = Field(None, exclude_if=lambda calls: calls is None)


class Choice(BaseModel):
    """The one choice (``n`` is always 1)."""

    index: int = 0
    message: AssistantMessage
    finish_reason: str
    logprobs: None = None


class ChatCompletion(BaseModel):
    """A whole answer (``stream`` false)."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage


def completion_id() -> str:
    """A fresh ``chatcmpl-...`` id."""
    return "chatcmpl-" + secrets.token_hex(12)


def completion(model_id: str, event: StreamEvent, parallel: bool = True) -> ChatCompletion:
    """The non-streamed answer from the engine's ``complete`` (only its first call unless ``parallel``)."""
    content, calls = answer_parts(event.delta, event.tool_calls, parallel)
    choice = Choice(
        message=AssistantMessage(content=content, tool_calls=calls),
        finish_reason="tool_calls" if calls else FINISH_REASONS.get(event.finish_reason or "stop", "stop"),
    )
    return ChatCompletion(
        id=completion_id(), created=int(time.time()), model=model_id, choices=[choice], usage=Usage.of(event)
    )


def chunk(
    cid: str,
    created: int,
    model_id: str,
    delta: dict[str, Any],
    finish_reason: Optional[str] = None,
    usage: Optional[Usage] = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; with ``usage``, the usage-only chunk (no choices)."""
    body: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model_id}
    if usage is not None:
        return body | {"choices": [], "usage": usage.model_dump()}
    return body | {
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "logprobs": None,
                "finish_reason": FINISH_REASONS.get(finish_reason, finish_reason) if finish_reason else None,
            }
        ]
    }
