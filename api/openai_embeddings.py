"""OpenAI's ``POST /v1/embeddings`` (and a share link's ``/s/<token>/v1/embeddings``) over the chat
engine's ``embed``: the request and answer bodies and the answer itself.

``input`` is a text or a list of texts (token arrays are refused: send the text); ``encoding_format``
``float`` (lists of numbers) or ``base64`` (each vector's little-endian float32 bytes, as OpenAI
sends them, and as OpenAI's Python client asks by default); ``dimensions`` keeps the first values of
each vector, re-normalised (Matryoshka models), at most the model's own size; ``user`` is accepted
and ignored. Limits: ``serving.schemas.MAX_EMBEDDING_INPUTS`` texts of at most
``MAX_EMBEDDING_INPUT_CHARS`` characters each, refused with the field named.
"""

from __future__ import annotations

import base64
from typing import Any, Literal, Optional, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request

from api.openai_answer import ChatSlots, engine_of
from api.openai_errors import OpenAIError
from trainer_core.serving.inputs import checked_inputs
from trainer_core.serving.schemas import MAX_EMBEDDING_DIMENSIONS
from trainer_core.vocabulary import OptionalWholeNumber


class EmbeddingRequest(BaseModel):
    """``POST /v1/embeddings``. Unknown fields are ignored, as OpenAI clients expect."""

    model_config = ConfigDict(extra="ignore")

    model: Optional[str] = Field(
        None, max_length=300, description='An embedding model GET /v1/models lists with "serves": "embeddings".'
    )
    input: Any = Field(description="A text, or a list of texts.")
    encoding_format: Literal["float", "base64"] = Field("float", description="float, or base64 (float32 bytes).")
    dimensions: OptionalWholeNumber = Field(
        None, ge=1, le=MAX_EMBEDDING_DIMENSIONS, description="Keep the first N values, re-normalised (Matryoshka)."
    )
    user: Optional[str] = Field(None, max_length=300, description="Accepted and ignored.")

    def texts(self) -> list[str]:
        """``input`` as a list of texts; OpenAIError 400 naming ``input`` for token arrays, an empty
        list, too many texts, an empty or too long text (``serving.inputs.checked_inputs``)."""
        texts = [self.input] if isinstance(self.input, str) else self.input
        if not isinstance(texts, list):
            raise OpenAIError(400, "input: give a text (a string) or a list of texts", param="input")
        for i, text in enumerate(texts):
            if isinstance(text, (int, list)) and not isinstance(text, bool):
                raise OpenAIError(
                    400,
                    f"input[{i}]: token arrays are not supported; send the text (a string, or a list of strings)",
                    param="input",
                    code="token_input_not_supported",
                )
        return checked_inputs(texts)


class EmbeddingObject(BaseModel):
    """One vector: a list of floats, or a base64 string of its float32 bytes."""

    object: Literal["embedding"] = "embedding"
    index: int
    embedding: Union[list[float], str]


class EmbeddingUsage(BaseModel):
    """Tokens the model read (an embedding has no completion)."""

    prompt_tokens: int
    total_tokens: int


class EmbeddingList(BaseModel):
    """The answer of ``POST /v1/embeddings``."""

    object: Literal["list"] = "list"
    data: list[EmbeddingObject]
    model: str
    usage: EmbeddingUsage


def encoded(vector: Any, encoding_format: str) -> Union[list[float], str]:
    """``vector`` (D,) as a list of floats, or (``base64``) its little-endian float32 bytes in base64."""
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return np.asarray(vector, dtype=np.float32).tolist()


def embeddings(request: Request, body: EmbeddingRequest, model_id: str, public: bool = False) -> EmbeddingList:
    """Check ``body``, then embed its texts with ``model_id`` (waiting for the engine's turn in one of
    the door's slots, as chat does: 429 when all are taken). Blocking: call it from a worker thread."""
    engine = engine_of(request)
    texts = body.texts()
    slots: ChatSlots = request.app.state.chat_slots["share" if public else "api"]
    slots.take()
    try:
        result = engine.embed(model_id, texts, body.dimensions)
    finally:
        slots.give()
    data = [
        EmbeddingObject(index=i, embedding=encoded(vector, body.encoding_format))
        for i, vector in enumerate(result.vectors)
    ]
    usage = EmbeddingUsage(prompt_tokens=result.prompt_tokens, total_tokens=result.prompt_tokens)
    return EmbeddingList(data=data, model=model_id, usage=usage)
