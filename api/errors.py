"""Error answers of the HTTP API: a 422 that names each bad field without echoing secrets, never a
500 for a body FastAPI's default handler cannot encode (``NaN`` / ``Infinity``), and a 507 for any
write that found the disk full (``process.disk_full``)."""

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

from trainer_core.process.disk_full import DISK_FULL_CODE, storage_refusal

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
    """422 with FastAPI's shape (``detail``: list of {loc, msg, type, input}) minus any secret."""
    return json_response(422, {"detail": [_safe_error(e) for e in exc.errors()]})


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
    return json_response(507, {"detail": message, "code": DISK_FULL_CODE})


def install(app: Any) -> None:
    """Register the handlers on ``app`` (ours, and the mounted Gradio app, whose own 422s would
    echo a secret sent in an event's data)."""
    app.add_exception_handler(RequestValidationError, validation_error)
    for error in (sqlite3.OperationalError, OSError):
        app.add_exception_handler(error, storage_failure)
