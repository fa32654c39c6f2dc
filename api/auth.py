"""Who may call what: the bearer-token check of the training API and the guard on the API
description (``/openapi.json``, ``/docs``), which is public only when no login and no token are set."""

from __future__ import annotations

import secrets
from typing import Any, Optional

from fastapi import Header, HTTPException, Request, status


def token_ok(request: Request, authorization: Optional[str]) -> bool:
    """True when no API token is configured, or ``authorization`` is ``Bearer <the token>``
    (constant-time comparison; an empty token never matches)."""
    expected = request.app.state.settings.api_token
    if expected is None:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    given = given.strip()
    return (
        scheme.lower() == "bearer"
        and bool(given)
        and secrets.compare_digest(given.encode(), expected.get_secret_value().encode())
    )


def bearer_vouched(settings: Any, scope: dict) -> bool:
    """Whether an ASGI request (``scope``) to ``/api/`` or ``/v1/`` is sure to pass ``require_token``:
    no API token is configured, or its ``Authorization`` header carries it (constant-time). The login
    throttle lets such requests through without holding a place (``api.throttle``). Share links
    (``/s/``) are never vouched for here."""
    if not scope.get("path", "").startswith(("/api/", "/v1/")):
        return False
    expected = settings.api_token
    if expected is None:
        return True
    header = next((value for name, value in scope.get("headers", ()) if name == b"authorization"), b"")
    scheme, _, given = header.decode("latin-1").partition(" ")
    given = given.strip()
    return (
        scheme.lower() == "bearer"
        and bool(given)
        and secrets.compare_digest(given.encode(), expected.get_secret_value().encode())
    )


def require_token(request: Request, authorization: Optional[str] = Header(None)) -> None:
    """FastAPI dependency: when ``STUDIO_API_TOKEN`` is set, demand ``Authorization: Bearer <token>``;
    raises 401 otherwise. The token is never logged or echoed."""
    if not token_ok(request, authorization):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "missing or wrong API token", headers={"WWW-Authenticate": "Bearer"}
        )


def logged_in_user(request: Request) -> Optional[str]:
    """The user name of the Gradio login session the request's cookie belongs to, if any."""
    gradio_app: Any = getattr(request.app.state, "gradio_app", None)
    if gradio_app is None:
        return None
    cookie = request.cookies.get(f"access-token-{gradio_app.cookie_id}") or request.cookies.get(
        f"access-token-unsecure-{gradio_app.cookie_id}"
    )
    return gradio_app.tokens.get(cookie) if cookie else None


def require_docs_access(request: Request, authorization: Optional[str] = Header(None)) -> None:
    """FastAPI dependency for the API description: open when neither a login nor a token is
    configured; otherwise a logged-in UI session or the bearer token. Raises 401."""
    settings = request.app.state.settings
    if not settings.login_enabled and settings.api_token is None:
        return
    if (settings.api_token is not None and authorization and token_ok(request, authorization)) or logged_in_user(
        request
    ):
        return
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        "log in on the page first, or send the API token",
        headers={"WWW-Authenticate": "Bearer"},
    )
