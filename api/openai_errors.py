"""Errors of the OpenAI-compatible routes (``/v1/*``, ``/s/<token>/v1/*``) in OpenAI's shape:
``{"error": {"message", "type", "param", "code"}}``, with the status OpenAI clients expect.

``OpenAIRoute`` is the route class of those routers: whatever goes wrong in a request (a body that
does not validate, a missing token, an engine refusal, a crash) leaves as such an answer, never as
FastAPI's 422 or a traceback. No message echoes what the caller sent.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any, Optional

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException  # FastAPI's own is a subclass; its body parser raises this one
from starlette.requests import Request
from starlette.responses import Response

from trainer_core.serving.errors import EMBED_BUSY, TRAINING_BUSY, ChatInputError, ChatUnavailable, UnknownModel

log = logging.getLogger("finetune_studio.openai")
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": what}
    for code, what in (
        (400, "Bad messages, input or settings; a chat model asked for embeddings or the other way round"),
        (401, "Missing or wrong API token"),
        (404, "Unknown model"),
        (409, "A training job runs: chat is unavailable until it ends"),
        (429, "Too many chat requests at once"),
        (500, "The model failed while answering"),
        (503, "The inference worker stopped; the next request loads the model anew"),
    )
}  # for the OpenAPI document
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])(?:~|/)[^\s'\"`),;]+")


class OpenAIError(Exception):
    """An answer in OpenAI's error shape; raise it anywhere in a request on these routes."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: Optional[str] = None,
        code: Optional[str] = None,
        headers: Optional[dict[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """``{"error": {...}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        """The JSON answer."""
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def from_engine(exc: BaseException, training: bool = False, public: bool = False) -> OpenAIError:
    """An engine refusal or failure as an OpenAI error: unknown model 404, bad input 400, chat
    refused while a training job runs 409 (marked not worth retrying: training takes minutes), chat
    unavailable otherwise (its process died) 503, anything else 500 with a plain message (details
    go to the server log only). ``public`` (share links): server paths are cut from messages."""
    if isinstance(exc, OpenAIError):
        return exc
    text = scrub_paths(str(exc)) if public else str(exc)
    if isinstance(exc, UnknownModel):
        return OpenAIError(404, text, param="model", code="model_not_found")
    if isinstance(exc, ChatInputError):
        return OpenAIError(400, text, param=exc.fields[0] if exc.fields else None, code=exc.code)
    if isinstance(exc, ChatUnavailable) and training:
        return OpenAIError(
            409,
            text or TRAINING_BUSY,
            type="conflict_error",
            code="training_in_progress",
            headers={"x-should-retry": "false"},
        )
    if isinstance(exc, ChatUnavailable):
        return OpenAIError(
            503, text or "chat is unavailable now; try again", type="server_error", code="chat_unavailable"
        )
    log.error("chat request failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
    return OpenAIError(
        500,
        "the model failed while answering (the inference worker stopped or raised an error); "
        "try again, and see the server log if it persists",
        type="server_error",
    )


def scrub_paths(text: str) -> str:
    """``text`` with absolute paths replaced by ``<folder>`` (share-link visitors see no server paths)."""
    return ABSOLUTE_PATH.sub("<folder>", text)


def training_now(request: Request) -> bool:
    """True while the app's training job runs (the reason chat is refused, when it is)."""
    runner = getattr(request.app.state, "runner", None)
    return bool(runner is not None and runner.status().is_training_running)


def error_for(request: Request, exc: BaseException, public: bool = False) -> OpenAIError:
    """``from_engine`` for a failure in ``request``."""
    training = isinstance(exc, ChatUnavailable) and (str(exc) in (TRAINING_BUSY, EMBED_BUSY) or training_now(request))
    return from_engine(exc, training=training, public=public)


def param_name(loc: tuple[Any, ...]) -> Optional[str]:
    """``("body", "messages", 0, "content")`` -> ``messages[0].content``."""
    name = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or None


def from_validation(exc: RequestValidationError, needed: str = "messages") -> OpenAIError:
    """400 naming the first bad field (pydantic's message, never the value sent); ``needed``: the
    field the route needs beside ``model`` (``messages``, or ``input`` for embeddings)."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    param = param_name(tuple(first.get("loc", ())))
    message = first.get("msg", "invalid request").removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    if param is None and first.get("type") in ("json_invalid", "model_attributes_type", "dict_type", "missing"):
        message = f"the body must be a JSON object with at least model and {needed}"
    return OpenAIError(400, f"{param}: {message}{more}" if param else f"{message}{more}", param=param)


def from_http(exc: HTTPException) -> OpenAIError:
    """An ``HTTPException`` (the token check's 401, the body parser's 400 for JSON it cannot read,
    e.g. nested thousands deep) in OpenAI's shape."""
    if exc.status_code == 401:
        return OpenAIError(
            401,
            "missing or wrong API token (send Authorization: Bearer <STUDIO_API_TOKEN>)",
            code="invalid_api_key",
            headers=dict(exc.headers or {}),
        )
    return OpenAIError(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))


class OpenAIRoute(APIRoute):
    """Route class whose every failure answers in OpenAI's error shape."""

    public = False  # True on share-link routes: no server paths in messages

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler, public = super().get_route_handler(), self.public

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                path = request.url.path
                needed = "input" if path.endswith("/embeddings") else "messages"
                needed = "prompt" if path.endswith("/v1/completions") else needed
                return from_validation(exc, needed).response()
            except HTTPException as exc:
                return from_http(exc).response()
            except Exception as exc:  # engine refusals, OpenAIError, crashes: never a traceback
                return error_for(request, exc, public).response()

        return answer


class SharedRoute(OpenAIRoute):
    """``OpenAIRoute`` for share-link routes: messages carry no server paths."""

    public = True
