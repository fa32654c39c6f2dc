"""OpenAI's ``POST /v1/audio/speech`` (and a share link's ``/s/<token>/v1/audio/speech``) over the
chat engine's ``speak``: the request body, its checks and the audio answer.

The body as OpenAI's: ``model``, ``input`` (the text, at most ``MAX_INPUT_CHARS`` characters),
``voice`` (here a speaker, what a text-to-speech run's ``speaker_column`` holds: a number "0", "1",
... for CSM, whose voices are numbered (a name refused naming the field), or a name for an
Orpheus-style run), ``response_format`` (``wav``, the default
here, or ``flac``; OpenAI's mp3 / opus / aac / pcm are refused), ``speed`` and ``instructions``
accepted and ignored (the model speaks at its own pace). The answer is the file's bytes at the
model's codec rate (CSM's Mimi, Orpheus' SNAC: 24 kHz), 16-bit mono.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from api.openai_answer import ChatSlots, engine_of
from api.openai_errors import OpenAIError
from trainer_core.serving.voices import speaker

MAX_INPUT_CHARS = 4096  # OpenAI's limit for one request's text
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
    voice: Union[str, int] = Field(
        "0", description='The speaker: a number ("0", "1", ...) or a name, as the run\'s training rows gave them.'
    )
    response_format: Literal["wav", "flac"] = Field("wav", description="wav (16-bit) or flac.")
    speed: Optional[float] = Field(None, description="Accepted and ignored (the model's own pace).")
    instructions: Optional[str] = Field(None, max_length=4096, description="Accepted and ignored.")

    def speaker(self) -> Union[int, str]:
        """``voice`` as a speaker: a whole number (CSM's numbered voices), else a name (an Orpheus-style
        run's speaker names; a model of numbered voices refuses it): ``serving.voices.speaker``'s rule;
        OpenAIError 400 naming ``voice`` for what it refuses."""
        try:
            return speaker(self.voice)
        except ValueError as exc:
            raise OpenAIError(
                400,
                f"voice: {exc}: give a speaker number (0, 1, ...) or, for a model trained on named speakers, a name its "
                "training rows gave",
                param="voice",
            ) from None


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
