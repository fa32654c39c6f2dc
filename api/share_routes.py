"""Share links over HTTP.

- ``POST /api/train/share`` / ``GET /api/train/share`` / ``DELETE /api/train/share/{link_id}``:
  create, list and revoke links (the API token, like every ``/api/train`` route).
- ``GET /s/<token>``: a small page for the link's one model (no login: the token is the key): a chat
  page, or for an embedding model a search page (a query ranked against passages by cosine, through
  ``/s/<token>/v1/embeddings``; the run's query prompt before the query).
- ``/s/<token>/v1``: ``base_url`` of an OpenAI client for that one model: ``GET models`` lists only
  it, ``POST chat/completions``, ``POST completions`` and ``POST responses`` (a chat model), ``POST embeddings`` (an embedding model), ``POST
  audio/transcriptions`` (a speech-to-text model) or ``POST audio/speech`` (a text-to-speech model)
  answers only for it (any other ``model`` is 404).

A forged, revoked or expired token is 403, a deleted run's 404, before anything else is done; the
token opens nothing else (it is not an API token and sets no cookie).
"""

from __future__ import annotations

import html
import json
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.auth import require_token
from api.openai_answer import answer, engine_of
from api.openai_audio import AUDIO_RESPONSES, transcriptions
from api.openai_completions import CompletionRequest, TextCompletion, text_answer
from api.openai_embeddings import EmbeddingList, EmbeddingRequest, embeddings
from api.openai_errors import ERRORS, OpenAIError, SharedRoute
from api.openai_response_input import ResponsesRequest
from api.openai_responses import ResponseObject, respond
from api.openai_schemas import ChatCompletion, ChatCompletionRequest, ModelList, ModelObject
from api.openai_speech import SPEECH_RESPONSES, SpeechRequest, speech
from trainer_core.serving.errors import ChatInputError, UnknownModel
from trainer_core.serving.schemas import ModelChoice
from trainer_core.serving.search import MAX_SEARCH_PASSAGES
from trainer_core.serving.share import (
    MAX_EXPIRES_IN_HOURS,
    MIN_EXPIRES_IN_HOURS,
    GoneShareLink,
    ShareLink,
    ShareLinkError,
    ShareLinks,
    expiry_problem,
)

manage = APIRouter(prefix="/api/train", tags=["share links"], dependencies=[Depends(require_token)])
scoped = APIRouter(prefix="/s/{token}/v1", tags=["shared model"], route_class=SharedRoute)
page = APIRouter(include_in_schema=False)
PAGE_TEMPLATE = Path(__file__).with_name("share_page.html")
SEARCH_TEMPLATE = Path(__file__).with_name("share_search.html")  # the page of an embedding model
SLOT = re.compile(r"\{\{([A-Z]+)\}\}")
ERROR_PAGE = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=robots content=noindex>"
    "<title>{{TITLE}}</title><style nonce={{NONCE}}>body{font:16px system-ui,sans-serif;margin:3em auto;"
    "max-width:36em;padding:0 1em}</style></head><body><h1>{{TITLE}}</h1><p>{{MESSAGE}}.</p></body></html>"
)


class ShareRequest(BaseModel):
    """A new link to ``model`` (a job id or ``JOB_ID/checkpoint-N``), valid for ``expires_in_hours``
    (omitted: until revoked)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(max_length=300)
    expires_in_hours: Optional[float] = Field(
        None, json_schema_extra={"minimum": MIN_EXPIRES_IN_HOURS, "maximum": MAX_EXPIRES_IN_HOURS}
    )

    @field_validator("expires_in_hours")
    @classmethod
    def _lifetime(cls, value: Optional[float]) -> Optional[float]:
        problem = expiry_problem(value)
        if problem:
            raise ValueError(problem)
        return value


def links_of(request: Request) -> ShareLinks:
    """The app's share-link store."""
    return request.app.state.share_links


@manage.post(
    "/share",
    response_model=ShareLink,
    status_code=201,
    responses={400: {"description": "Not a run or checkpoint with weights"}, 404: {"description": "Unknown model"}},
)
def create_link(body: ShareRequest, request: Request, links: ShareLinks = Depends(links_of)) -> ShareLink:
    """A signed link to one run's final weights or one checkpoint. Its ``url_path`` is the chat
    page, its ``api_base_path`` an OpenAI client's ``base_url``."""
    try:
        engine = engine_of(request)
    except OpenAIError as exc:  # chat is not set up on this server
        raise HTTPException(exc.status, exc.message) from None
    engine.resolve(body.model)  # an unknown model is a 404 refusal, one without weights a 400 (api.errors)
    return links.create(body.model, body.expires_in_hours)


@manage.get("/share", response_model=list[ShareLink])
def list_links(model: Optional[str] = None, links: ShareLinks = Depends(links_of)) -> list[ShareLink]:
    """Every link, newest first (revoked and expired ones too, with their ``state``)."""
    return links.list(model)


@manage.delete("/share/{link_id}", response_model=ShareLink, responses={404: {"description": "Unknown link"}})
def revoke_link(link_id: str, links: ShareLinks = Depends(links_of)) -> ShareLink:
    """Revoke a link: its token stops working at once."""
    return links.revoke(link_id)  # an unknown link: a 404 refusal (api.errors)


def shared_model(token: str, request: Request) -> ModelChoice:
    """The model the token grants: 403 (forged, revoked, expired) or 404 (run or weights gone)
    in OpenAI's shape, before anything else happens."""
    try:
        link = links_of(request).verify(token)
        return engine_of(request).resolve(link.model_id)
    except GoneShareLink as exc:
        raise OpenAIError(404, str(exc), type="not_found_error", code="share_link_gone") from None
    except ShareLinkError as exc:
        raise OpenAIError(403, str(exc), type="permission_error", code="invalid_share_link") from None
    except ChatInputError:  # unknown model, or its folder was deleted: nothing of the cause is told
        raise OpenAIError(
            404, "the model of this share link is no longer available", type="not_found_error", code="share_link_gone"
        ) from None


@scoped.get("/models", response_model=ModelList, responses=ERRORS)
def shared_models(choice: ModelChoice = Depends(shared_model)) -> ModelList:
    """Only the link's model."""
    return ModelList(data=[ModelObject.of(choice)])


@scoped.get("/models/{model_id:path}", response_model=ModelObject, responses=ERRORS)
def shared_model_info(model_id: str, choice: ModelChoice = Depends(shared_model)) -> ModelObject:
    """The link's model; any other id is 404."""
    if model_id != choice.id:
        raise _other_model(choice)
    return ModelObject.of(choice)


@scoped.post("/chat/completions", response_model=ChatCompletion, responses=ERRORS)
def shared_chat(body: ChatCompletionRequest, request: Request, choice: ModelChoice = Depends(shared_model)) -> Any:
    """Chat with the link's model (``model`` must be its id, or omitted)."""
    return _generated(body.model, choice, lambda: answer(request, body, choice.id, public=True))


@scoped.post("/completions", response_model=TextCompletion, responses=ERRORS)
def shared_text(body: CompletionRequest, request: Request, choice: ModelChoice = Depends(shared_model)) -> Any:
    """Text completions with the link's model (``model`` must be its id, or omitted)."""
    return _generated(body.model, choice, lambda: text_answer(request, body, choice.id, public=True))


@scoped.post("/responses", response_model=ResponseObject, responses=ERRORS)
def shared_responses(body: ResponsesRequest, request: Request, choice: ModelChoice = Depends(shared_model)) -> Any:
    """The Responses API with the link's model (``model`` must be its id, or omitted)."""
    return _generated(body.model, choice, lambda: respond(request, body, choice.id, public=True))


def _generated(asked: Optional[str], choice: ModelChoice, reply: Callable[[], Any]) -> Any:
    """``reply()`` when ``asked`` (the request's model) is the link's or None; 404 otherwise, or when
    the model went away meanwhile."""
    if asked not in (None, choice.id):
        raise _other_model(choice)
    try:
        return reply()
    except UnknownModel:  # deleted between the check and the answer
        raise OpenAIError(404, "the model of this share link is no longer available", code="share_link_gone") from None


@scoped.post("/embeddings", response_model=EmbeddingList, responses=ERRORS)
def shared_embeddings(
    body: EmbeddingRequest, request: Request, choice: ModelChoice = Depends(shared_model)
) -> EmbeddingList:
    """Embed with the link's model (``model`` must be its id, or omitted)."""
    if body.model not in (None, choice.id):
        raise _other_model(choice)
    try:
        return embeddings(request, body, choice.id, public=True)
    except UnknownModel:  # deleted between the check and the answer
        raise OpenAIError(404, "the model of this share link is no longer available", code="share_link_gone") from None


@scoped.post("/audio/transcriptions", responses=ERRORS | AUDIO_RESPONSES)
async def shared_transcription(request: Request, choice: ModelChoice = Depends(shared_model)) -> Any:
    """Transcribe with the link's model (``model`` must be its id, or omitted)."""
    try:
        return await transcriptions(request, choice.id, public=True)
    except UnknownModel:  # deleted between the check and the answer
        raise OpenAIError(404, "the model of this share link is no longer available", code="share_link_gone") from None


@scoped.post("/audio/speech", responses=ERRORS | SPEECH_RESPONSES, response_class=Response)
def shared_speech(body: SpeechRequest, request: Request, choice: ModelChoice = Depends(shared_model)) -> Response:
    """Speak with the link's model (``model`` must be its id, or omitted)."""
    if body.model not in (None, choice.id):
        raise _other_model(choice)
    try:
        return speech(request, body, choice.id, public=True)
    except UnknownModel:  # deleted between the check and the answer
        raise OpenAIError(404, "the model of this share link is no longer available", code="share_link_gone") from None


def _other_model(choice: ModelChoice) -> OpenAIError:
    return OpenAIError(
        404, f"this share link serves only the model {choice.id!r}", param="model", code="model_not_found"
    )


@page.get("/s/{token}", response_class=HTMLResponse)
@page.get("/s/{token}/", response_class=HTMLResponse)
def chat_page(token: str, request: Request) -> HTMLResponse:
    """The chat page of a link (the search page for an embedding model), or a short page saying why
    the link does not work."""
    try:
        choice = shared_model(token, request)
    except OpenAIError as exc:
        return _page(exc.status, ERROR_PAGE, TITLE="Link not available", MESSAGE=html.escape(exc.message))
    facts: dict[str, Any] = {"model": choice.id}
    template = PAGE_TEMPLATE
    if choice.serves == "embeddings":  # an embedder answers searches, not chat
        facts.update(query_prompt=choice.query_prompt or "", max_passages=MAX_SEARCH_PASSAGES)
        template = SEARCH_TEMPLATE
    config = json.dumps(facts).replace("<", "\\u003c").replace("&", "\\u0026")
    return _page(200, template.read_text(encoding="utf-8"), TITLE=html.escape(choice.label), CONFIG=config)


def _page(status: int, template: str, **values: str) -> HTMLResponse:
    """``template`` with its ``{{NAME}}`` slots filled in one pass (a value never fills another's
    slot), under a nonce-only Content-Security-Policy: nothing from other sites, no framing, no
    referrer (the token is in the address)."""
    nonce = secrets.token_urlsafe(16)
    values["NONCE"] = nonce
    document = SLOT.sub(lambda m: values.get(m[1], ""), template)
    csp = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return HTMLResponse(
        document,
        status_code=status,
        headers={
            "Content-Security-Policy": csp,
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
        },
    )


def install(app: FastAPI) -> None:
    """The link store at ``app.state.share_links`` and the three routers."""
    app.state.share_links = ShareLinks(app.state.settings)
    for router in (manage, scoped, page):
        app.include_router(router)
