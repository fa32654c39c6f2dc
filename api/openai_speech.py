"""OpenAI's ``POST /v1/audio/speech`` (and a share link's ``/s/<token>/v1/audio/speech``) over the
chat engine's ``speak``: the request body, its checks and the audio answer.

The body as OpenAI's: ``model``, ``input`` (the text, at most ``MAX_INPUT_CHARS`` characters),
``voice`` (here a speaker id, the number a text-to-speech run's ``speaker_column`` holds: "0", "1",
...; OpenAI's voice names are refused naming the field), ``response_format`` (``wav``, the default
here, or ``flac``; OpenAI's mp3 / opus / aac / pcm are refused), ``speed`` and ``instructions``
accepted and ignored (the model speaks at its own pace). The answer is the file's bytes at the
model's codec rate (CSM's Mimi: 24 kHz), 16-bit mono.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from api.openai_answer import ChatSlots, engine_of
from api.openai_errors import OpenAIError

MAX_INPUT_CHARS = 4096  # OpenAI's limit for one request's text
MAX_VOICE = 1_000_000  # the largest speaker id a request may name
MEDIA_TYPES = {"wav": "audio/wav", "flac": "audio/flac"}
SPEECH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {t: {} for t in MEDIA_TYPES.values()}, "description": "The speech: a wav or flac file"}
}  # for the OpenAPI document


class SpeechRequest(BaseModel):
    """``POST /v1/audio/speech``. Unknown fields are ignored, as OpenAI clients expect."""

    model_config = ConfigDict(extra="ignore")

    model: Optional[str] = Field(
        None, max_length=300, description='A text-to-speech model GET /v1/models lists with "serves": "speech".'
    )
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS, description="The text to say.")
    voice: Union[str, int] = Field("0", description='The speaker id ("0", "1", ...: the run\'s speaker numbers).')
    response_format: Literal["wav", "flac"] = Field("wav", description="wav (16-bit) or flac.")
    speed: Optional[float] = Field(None, description="Accepted and ignored (the model's own pace).")
    instructions: Optional[str] = Field(None, max_length=4096, description="Accepted and ignored.")

    def speaker(self) -> int:
        """``voice`` as a speaker id; OpenAIError 400 naming ``voice`` for anything but a whole number."""
        text = str(self.voice).strip()
        if isinstance(self.voice, bool) or not text.isdigit() or int(text) > MAX_VOICE:
            raise OpenAIError(
                400,
                f"voice: {str(self.voice)[:40]!r} is not a speaker id: this model's voices are numbered (0, 1, ...; "
                "the speaker numbers of its training rows)",
                param="voice",
            )
        return int(text)


def speech(request: Request, body: SpeechRequest, model_id: str, public: bool = False) -> Response:
    """Check ``body``, then say its ``input`` with ``model_id`` (waiting for the engine's turn in one
    of the door's slots: 429 when all are taken). Returns the audio file. Blocking: call it from a
    worker thread."""
    from trainer_core.data.audio import wav_bytes

    if not body.input.strip():
        raise OpenAIError(400, "input: give the text to say", param="input")
    speaker = body.speaker()
    engine = engine_of(request)
    slots: ChatSlots = request.app.state.chat_slots["share" if public else "api"]
    slots.take()
    try:
        result = engine.speak(model_id, body.input, speaker)
    finally:
        slots.give()
    data = wav_bytes(result.samples, result.sampling_rate, fmt=body.response_format.upper())
    return Response(content=data, media_type=MEDIA_TYPES[body.response_format])
