"""The OpenAI-compatible API: ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST
/v1/completions`` (``api/openai_completions.py``), ``POST /v1/responses`` (``api/openai_responses.py``), ``POST /v1/embeddings``, ``POST /v1/audio/transcriptions`` and ``POST /v1/audio/speech`` over the chat engine at ``app.state.engine``,
behind the API token (the rule of ``/api/train/*``). Answers and streams: ``api/openai_answer.py``;
embeddings: ``api/openai_embeddings.py``; transcriptions: ``api/openai_audio.py``; speech: ``api/openai_speech.py``; errors in
OpenAI's shape: ``api/openai_errors.py``.

``install(app)`` adds these routes and the share links' (``api/share_routes.py``) to the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response

from api import share_routes
from api.auth import require_token
from api.openai_answer import CHAT_SLOTS, ChatSlots, answer, engine_of
from api.openai_audio import AUDIO_RESPONSES, transcriptions
from api.openai_completions import CompletionRequest, TextCompletion, text_answer
from api.openai_embeddings import EmbeddingList, EmbeddingRequest, embeddings
from api.openai_errors import ERRORS, OpenAIError, OpenAIRoute
from api.openai_response_input import ResponsesRequest
from api.openai_responses import ResponseObject, respond
from api.openai_schemas import ChatCompletion, ChatCompletionRequest, ModelList, ModelObject
from api.openai_speech import SPEECH_RESPONSES, SpeechRequest, speech

if TYPE_CHECKING:
    from trainer_core.serving.engine import ChatEngine

router = APIRouter(
    prefix="/v1", tags=["OpenAI-compatible"], route_class=OpenAIRoute, dependencies=[Depends(require_token)]
)


@router.get("/models", response_model=ModelList, responses=ERRORS)
def list_models(engine: Any = Depends(engine_of)) -> ModelList:
    """``base`` and every run and checkpoint that can answer."""
    return ModelList(data=[ModelObject.of(choice) for choice in engine.choices()])


@router.get("/models/{model_id:path}", response_model=ModelObject, responses=ERRORS)
def get_model(model_id: str, engine: Any = Depends(engine_of)) -> ModelObject:
    """One model (404 ``model_not_found`` when unknown)."""
    return ModelObject.of(engine.resolve(model_id))


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses=ERRORS
    | {200: {"content": {"text/event-stream": {}}, "description": "The answer, or chunks when `stream` is true"}},
)
def chat_completions(body: ChatCompletionRequest, request: Request) -> Any:
    """An answer in OpenAI's ``chat.completion`` shape, or streamed chunks with ``stream: true``."""
    if not body.model:
        raise OpenAIError(400, "model: required (see GET /v1/models)", param="model")
    return answer(request, body, body.model)


@router.post(
    "/completions",
    response_model=TextCompletion,
    responses=ERRORS
    | {200: {"content": {"text/event-stream": {}}, "description": "The answer, or chunks when `stream` is true"}},
)
def text_completions(body: CompletionRequest, request: Request) -> Any:
    """The ``prompt`` continued (no chat template) in OpenAI's ``text_completion`` shape, or streamed
    chunks with ``stream: true``."""
    if not body.model:
        raise OpenAIError(400, "model: required (see GET /v1/models)", param="model")
    return text_answer(request, body, body.model)


@router.post(
    "/responses",
    response_model=ResponseObject,
    responses=ERRORS
    | {200: {"content": {"text/event-stream": {}}, "description": "The response, or events when `stream` is true"}},
)
def responses(body: ResponsesRequest, request: Request) -> Any:
    """A ``response`` in OpenAI's Responses API shape (``output`` items: a message, function calls), or
    its typed events with ``stream: true``; nothing is stored (see ``api/openai_responses.py``)."""
    if not body.model:
        raise OpenAIError(400, "model: required (see GET /v1/models)", param="model")
    return respond(request, body, body.model)


@router.post("/embeddings", response_model=EmbeddingList, responses=ERRORS)
def create_embeddings(body: EmbeddingRequest, request: Request) -> EmbeddingList:
    """Vectors of ``input`` in OpenAI's ``list`` of ``embedding`` objects, from an embedding model."""
    if not body.model:
        raise OpenAIError(400, "model: required (see GET /v1/models)", param="model")
    return embeddings(request, body, body.model)


@router.post("/audio/transcriptions", responses=ERRORS | AUDIO_RESPONSES)
async def create_transcription(request: Request) -> Any:
    """The text of the multipart ``file`` from a speech-to-text model (``model``), in OpenAI's
    ``response_format`` json, text or verbose_json (see ``api/openai_audio.py``)."""
    return await transcriptions(request, None)


@router.post("/audio/speech", responses=ERRORS | SPEECH_RESPONSES, response_class=Response)
def create_speech(body: SpeechRequest, request: Request) -> Response:
    """The speech of ``input`` from a text-to-speech model (``model``) in ``voice`` (a speaker id), as a
    wav or flac file (see ``api/openai_speech.py``)."""
    if not body.model:
        raise OpenAIError(400, "model: required (see GET /v1/models)", param="model")
    return speech(request, body, body.model)


def install(app: FastAPI, engine: Optional[ChatEngine] = None) -> None:
    """Add ``/v1/*``, ``/api/train/share*`` and ``/s/<token>*`` to ``app``. Call it before the UI
    is mounted at ``/`` (a mount there answers every later path). The engine is read from
    ``app.state.engine`` at each request (``engine``, when given, is put there)."""
    if engine is not None:
        app.state.engine = engine
    app.state.chat_slots = {door: ChatSlots(limit) for door, limit in CHAT_SLOTS.items()}
    share_routes.install(app)
    app.include_router(router)
