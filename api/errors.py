"""Error answers of the HTTP API, one handler per kind, never a try/except per route.

Every refusal (``trainer_core.refusals.Refusal``, raised by the engine or a route) is answered as
JSON ``{"detail": <message>, "fields": [<request fields>], "code": <stable code>}`` with the
refusal's 4xx status (400 a request that cannot be used, 404 an unknown id, 409 busy, 422 a value
refused); a missing dataset file keeps its ``detail`` object (``{"message", "missing"}``). A body
that does not validate is FastAPI's 422 (``detail``: the list of problems, without secrets) with the
same ``fields`` and ``code`` (``invalid_setting``) beside it; never a 500 for a body FastAPI's default
handler cannot encode (``NaN`` / ``Infinity``). A write that found the disk full is a 507 with code
``disk_full`` (``process.disk_full``). The OpenAI-compatible routes answer in OpenAI's shape
instead (``api.openai_errors``)."""

from __future__ import annotations

import json
import logging
import math
import re
import sqlite3
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from trainer_core.admission.request_paths import MissingPaths
from trainer_core.process.disk_full import DISK_FULL_CODE, storage_refusal
from trainer_core.refusals import INVALID_SETTING, Refusal, error_fields

log = logging.getLogger("finetune_studio.api")

SECRET_KEY = re.compile(r"token|password|secret|authorization|api_key", re.IGNORECASE)
REDACTED = "***"
MAX_ECHO_CHARS = 200  # an echoed input is cut to this many characters


def redact(value: Any, key: str = "") -> Any:
    """``value`` made safe to send back: values under secret-looking keys replaced by ``***``,
    non-finite floats written as strings (JSON has no NaN), long strings cut."""
    if SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, dict):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, key) for v in value[:20]]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str) and len(value) > MAX_ECHO_CHARS:
        return value[:MAX_ECHO_CHARS] + f"... ({len(value)} characters)"
    return value


def _safe_error(error: dict[str, Any]) -> dict[str, Any]:
    loc = [str(part) for part in error.get("loc", ())]
    field = next((part for part in reversed(loc) if not part.isdigit()), "")
    safe = {"loc": loc, "msg": error.get("msg", ""), "type": error.get("type", "")}
    if "input" in error:
        safe["input"] = redact(error["input"], field)
    ctx = error.get("ctx")
    if ctx:
        safe["ctx"] = {k: redact(v if isinstance(v, (int, float, str, bool)) else str(v), k) for k, v in ctx.items()}
    return safe


def json_response(status_code: int, content: Any) -> Response:
    """``content`` as JSON that always encodes: ASCII-escaped (a lone surrogate in a string becomes
    ``\\ud800`` instead of failing), non-finite numbers refused upstream by ``redact``."""
    body = json.dumps(jsonable_encoder(content), ensure_ascii=True, allow_nan=False, default=str)
    return Response(content=body, status_code=status_code, media_type="application/json")


async def validation_error(request: Request, exc: RequestValidationError) -> Response:
    """422 with FastAPI's shape (``detail``: list of {loc, msg, type, input}) minus any secret, and
    the request fields concerned (``fields``) with code ``invalid_setting``."""
    errors = exc.errors()
    fields = list(dict.fromkeys(name for error in errors for name in error_fields(error)))
    return json_response(422, {"detail": [_safe_error(e) for e in errors], "fields": fields, "code": INVALID_SETTING})


def refusal_body(exc: Refusal) -> dict[str, Any]:
    """``{"detail", "fields", "code"}`` of a refusal (a missing dataset file's ``detail`` is the
    object the API has always answered: ``{"message", "missing"}``)."""
    detail: Any = str(exc)
    if isinstance(exc, MissingPaths):
        detail = {"message": "dataset files not found", "missing": exc.paths}
    return {"detail": detail, "fields": list(exc.fields), "code": exc.code}


async def refused(request: Request, exc: Refusal) -> Response:
    """A refusal as ``refusal_body`` with its status (a 4xx)."""
    log.info("%s %s refused (%s, %d)", request.method, request.url.path, exc.code, exc.status)
    return json_response(exc.status, refusal_body(exc))


async def storage_failure(request: Request, exc: Exception) -> Response:
    """507 Insufficient Storage for a write that found the disk full (SQLite's "database or disk is
    full", ENOSPC / EDQUOT): ``{"detail": <what happened and what to free>, "code": "disk_full"}``.
    Nothing was saved (the statement or transaction rolled back). Any other error is re-raised: the
    server error it was."""
    settings = getattr(request.app.state, "settings", None)
    message = storage_refusal(exc, settings.data_dir if settings is not None else None)
    if message is None:
        raise exc
    log.warning("%s %s refused: %s", request.method, request.url.path, message)
    return json_response(507, {"detail": message, "fields": [], "code": DISK_FULL_CODE})


def install(app: Any) -> None:
    """Register the handlers on ``app`` (ours, and the mounted Gradio app, whose own 422s would
    echo a secret sent in an event's data)."""
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Refusal, refused)
    for error in (sqlite3.OperationalError, OSError):
        app.add_exception_handler(error, storage_failure)
