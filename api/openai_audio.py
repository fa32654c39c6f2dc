"""OpenAI's ``POST /v1/audio/transcriptions`` (and a share link's ``/s/<token>/v1/audio/transcriptions``)
over the chat engine's ``transcribe``: the multipart form, the checks of the upload and the answer.

The form as OpenAI's: ``file`` (wav / flac / mp3 / ogg, at most ``MAX_AUDIO_BYTES``), ``model``,
``language`` (a code such as "en"; empty: the run's own, else detected), ``response_format``
(``json``: ``{"text"}``; ``text``: the plain text; ``verbose_json``: text, language, duration and
one segment; OpenAI's ``srt`` / ``vtt`` need timestamps, which are off here: refused), ``prompt`` and
``temperature`` accepted and ignored (greedy decoding). The upload is checked before any model is
loaded: its header must read as audio (``data.audio.audio_info``), and it travels to the inference
worker as a ``data:`` URL, never as a file the caller names.
"""

from __future__ import annotations

import base64
from typing import Any, Literal, Optional

from fastapi.responses import PlainTextResponse
from pydantic import BaseModel
from starlette.datastructures import UploadFile
from starlette.requests import Request

from api.openai_answer import ChatSlots, engine_of
from api.openai_errors import OpenAIError

MAX_AUDIO_BYTES = 25 * 1024 * 1024  # OpenAI's limit for an upload
FORMATS = ("json", "text", "verbose_json")
AUDIO_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {"application/json": {}, "text/plain": {}},
        "description": "The transcript: {text} (json), the text (text), or text, language, duration and segments "
        "(verbose_json)",
    }
}  # for the OpenAPI document


class Transcription(BaseModel):
    """``response_format`` json: OpenAI's ``Transcription``."""

    text: str


class Segment(BaseModel):
    """One segment of ``verbose_json`` (the whole clip: timestamps are off)."""

    id: int = 0
    seek: int = 0
    start: float = 0.0
    end: float
    text: str
    tokens: list[int] = []
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0


class TranscriptionVerbose(BaseModel):
    """``response_format`` verbose_json: OpenAI's ``TranscriptionVerbose``."""

    task: Literal["transcribe"] = "transcribe"
    language: str
    duration: float
    text: str
    segments: list[Segment]


async def read_upload(file: Any) -> bytes:
    """The bytes of upload ``file``; OpenAIError 400 naming ``file`` when it is missing, empty or
    larger than ``MAX_AUDIO_BYTES`` (read no further than that)."""
    if not isinstance(file, UploadFile):
        raise OpenAIError(400, "file: required (the audio, as a multipart file)", param="file")
    data = await file.read(MAX_AUDIO_BYTES + 1)
    if not data:
        raise OpenAIError(400, "file: the upload is empty", param="file")
    if len(data) > MAX_AUDIO_BYTES:
        raise OpenAIError(
            400,
            f"file: larger than {MAX_AUDIO_BYTES // (1024 * 1024)} MB; send a shorter clip",
            param="file",
            code="file_too_large",
        )
    return data


def audio_url(data: bytes) -> str:
    """``data`` as a ``data:`` URL once its header reads as audio; OpenAIError 400 naming ``file``
    otherwise (``data.audio.audio_info``)."""
    from trainer_core.data.audio import audio_info
    from trainer_core.data.errors import RowError

    url = "data:application/octet-stream;base64," + base64.b64encode(data).decode("ascii")
    try:
        audio_info(url)
    except RowError:
        raise OpenAIError(
            400, "file: not audio that can be read (send wav, flac, mp3 or ogg)", param="file", code="audio_unreadable"
        ) from None
    return url


def form_text(form: Any, name: str, limit: int = 300) -> Optional[str]:
    """Form field ``name`` as text (None when absent or empty); 400 naming it when it is a file or
    longer than ``limit`` characters."""
    value = form.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise OpenAIError(400, f"{name}: give a short text", param=name)
    return value


async def transcriptions(request: Request, model_id: Optional[str], public: bool = False) -> Any:
    """Read the multipart form of ``request``, check it, and transcribe its ``file`` with
    ``model_id`` (None: the form's ``model``), waiting for the engine's turn in one of the door's
    slots (429 when all are taken). Returns the answer in the asked ``response_format``."""
    import anyio

    form = await request.form(max_files=1, max_fields=16)
    asked = form_text(form, "model")
    if model_id is None:
        if asked is None:
            raise OpenAIError(400, "model: required (see GET /v1/models)", param="model")
        model_id = asked
    elif asked not in (None, model_id):
        raise OpenAIError(
            404, f"this share link serves only the model {model_id!r}", param="model", code="model_not_found"
        )
    response_format = form_text(form, "response_format") or "json"
    if response_format not in FORMATS:
        raise OpenAIError(
            400,
            f"response_format: one of {', '.join(FORMATS)} (srt and vtt need timestamps, which are off)",
            param="response_format",
        )
    language = form_text(form, "language", limit=40)
    url = audio_url(await read_upload(form.get("file")))
    engine = engine_of(request)
    slots: ChatSlots = request.app.state.chat_slots["share" if public else "api"]
    slots.take()
    try:
        result = await anyio.to_thread.run_sync(lambda: engine.transcribe(model_id, url, language))
    finally:
        slots.give()
    if response_format == "text":
        return PlainTextResponse(result.text + "\n")
    if response_format == "verbose_json":
        segment = Segment(end=round(result.duration, 3), text=result.text)
        return TranscriptionVerbose(
            language=result.language or "", duration=round(result.duration, 3), text=result.text, segments=[segment]
        )
    return Transcription(text=result.text)
