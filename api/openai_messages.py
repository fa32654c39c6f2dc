"""The messages of a ``POST /v1/chat/completions`` request as OpenAI clients send them, and their
mapping to our ``ChatMessage`` list: text, image and audio parts; an assistant's ``tool_calls`` and
``tool`` results in our canonical form for tools (``api.openai_tools``). Each refusal is a 400 naming
the field (``messages[2].content[0].image_url``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.openai_errors import OpenAIError, param_name
from api.openai_tools import assistant_text, tool_result
from trainer_core.data.audio import MARKER as AUDIO_MARKER
from trainer_core.data.audio import input_audio_url
from trainer_core.data.errors import RowError
from trainer_core.data.images import MARKER
from trainer_core.serving.schemas import MAX_AUDIO_URL_CHARS, MAX_IMAGE_URL_CHARS, ChatMessage
from trainer_core.tools.definitions import MAX_TOOLS
from trainer_core.tools.render import wrapped_result

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


class ImageURL(BaseModel):
    """OpenAI's ``image_url`` object (``detail`` is ignored)."""

    model_config = ConfigDict(extra="ignore")

    url: str = Field(max_length=MAX_IMAGE_URL_CHARS)


class InputAudio(BaseModel):
    """OpenAI's ``input_audio`` object: the clip's bytes in base64 and its ``format`` (wav, mp3, ...)."""

    model_config = ConfigDict(extra="ignore")

    data: str = Field(max_length=MAX_AUDIO_URL_CHARS)
    format: str = Field("wav", max_length=20)


class ContentPart(BaseModel):
    """One part of a message's content: ``{"type": "text", "text": ...}``; for a vision-language
    model, ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` (an http(s)
    URL only where the server fetches them: ``allow_remote_images``); for an audio-in chat model,
    ``{"type": "input_audio", "input_audio": {"data": <base64>, "format": "wav"}}``."""

    model_config = ConfigDict(extra="ignore")

    type: str
    text: Optional[str] = None
    image_url: Union[str, ImageURL, None] = None
    input_audio: Optional[InputAudio] = None


class RequestMessage(BaseModel):
    """A message as OpenAI clients send it (``name`` and other fields are ignored): an assistant's
    may carry ``tool_calls`` (its content then may be null), a ``tool`` message the ``tool_call_id``
    of the call it answers (``api.openai_tools``)."""

    model_config = ConfigDict(extra="ignore")

    role: str
    content: Union[str, list[ContentPart], None] = None
    tool_calls: Optional[list[Any]] = Field(None, max_length=MAX_TOOLS)
    tool_call_id: Optional[str] = Field(None, max_length=300)


def chat_messages(messages: list[RequestMessage], fetch: Optional[Callable[[str], str]] = None) -> list[ChatMessage]:
    """Our ``ChatMessage`` list: roles system (or developer) / user / assistant / tool; text parts
    joined, each ``image_url`` part an ``<image>`` marker where it stood and an image of the
    message; calls and results in canonical form (``api.openai_tools``), the results of one
    assistant message's calls in their order. ``fetch`` turns an http(s) URL into a data: URL
    (None: such URLs are refused)."""
    out: list[ChatMessage] = []
    results: list[tuple[int, ChatMessage]] = []  # the tool messages after the last assistant's calls
    open_calls: list[tuple[str, str]] = []
    for i, request in enumerate(messages):
        message, where = _message(i, request, fetch), f"messages[{i}]"
        if message.role == "tool":
            place = tool_result(where, request.tool_call_id, open_calls)
            results.append((place, message.model_copy(update={"content": wrapped_result(message.content)})))
            continue
        out.extend(m for _, m in sorted(results, key=lambda pair: pair[0]))
        results, open_calls = [], []
        if message.role == "assistant" and request.tool_calls:
            text, open_calls = assistant_text(where, message.content, request.tool_calls)
            message = message.model_copy(update={"content": text})
        out.append(message)
    return out + [m for _, m in sorted(results, key=lambda pair: pair[0])]


def _image(url: str, where: str, fetch: Optional[Callable[[str], str]]) -> str:
    """The data: URL of an image part; OpenAIError 400 naming ``where`` for a remote URL the server
    does not fetch or for anything else."""
    if url.startswith("data:image/"):
        return url
    if url.startswith(("http://", "https://")):
        if fetch is None:
            raise OpenAIError(
                400,
                f"{where}: this server does not fetch remote image URLs (STUDIO_ALLOW_REMOTE_IMAGES is off); send "
                "the image as a data:image/...;base64,... URL",
                param=where,
            )
        return fetch(url)
    raise OpenAIError(400, f"{where}: give a data:image/...;base64,... URL", param=where)


def _audio(clip: InputAudio, where: str) -> str:
    """The data: URL of an ``input_audio`` part (``audio.input_audio_url``); OpenAIError 400 naming
    ``where`` when it has no data or a format that is not audio."""
    try:
        return input_audio_url({"input_audio": clip.model_dump()})
    except RowError as exc:
        raise OpenAIError(400, f"{where}: {exc}", param=where) from None


def _message(index: int, message: RequestMessage, fetch: Optional[Callable[[str], str]] = None) -> ChatMessage:
    where = f"messages[{index}]"
    role = ROLES.get(message.role)
    if role is None:
        raise OpenAIError(
            400,
            f"{where}.role: role {message.role[:40]!r} is not supported; use system, user, assistant or tool "
            "(the older function role is not supported)",
            param=f"{where}.role",
        )
    if message.content is None and not (role == "assistant" and message.tool_calls):
        raise OpenAIError(400, f"{where}.content: a text content is required", param=f"{where}.content")
    images: list[str] = []
    audios: list[str] = []
    if message.content is None or isinstance(message.content, str):
        text = message.content or ""
    else:
        pieces = []
        for j, part in enumerate(message.content):
            if part.type == "image_url" and part.image_url is not None:
                url = part.image_url if isinstance(part.image_url, str) else part.image_url.url
                images.append(_image(url, f"{where}.content[{j}].image_url", fetch))
                pieces.append(MARKER)
            elif part.type == "input_audio" and part.input_audio is not None:
                audios.append(_audio(part.input_audio, f"{where}.content[{j}].input_audio"))
                pieces.append(AUDIO_MARKER)
            elif part.type == "text" and part.text is not None:
                pieces.append(part.text)
            else:
                raise OpenAIError(
                    400,
                    f'{where}.content[{j}]: only text parts ({{"type": "text", "text": ...}}), image_url parts '
                    "and input_audio parts are supported",
                    param=f"{where}.content[{j}]",
                )
        text = "".join(pieces)
    try:
        return ChatMessage(role=role, content=text, images=images, audios=audios)
    except ValidationError as exc:
        error = exc.errors()[0]
        param = f"{where}.{param_name(tuple(error['loc']))}"
        raise OpenAIError(400, f"{param}: {error['msg']}", param=param) from None
