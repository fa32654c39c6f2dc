"""Error answers of the HTTP API: a 422 that names each bad field without echoing secrets, and
never a 500 for a body FastAPI's default handler cannot encode (``NaN`` / ``Infinity``)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

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


def install(app: Any) -> None:
    """Register the handlers on ``app`` (ours, and the mounted Gradio app, whose own 422s would
    echo a secret sent in an event's data)."""
    app.add_exception_handler(RequestValidationError, validation_error)
