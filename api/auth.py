"""Bearer-token check for the training API (constant-time comparison)."""

from __future__ import annotations

import secrets
from typing import Optional

from fastapi import Header, HTTPException, Request, status


def require_token(request: Request, authorization: Optional[str] = Header(None)) -> None:
    """FastAPI dependency: when ``STUDIO_API_TOKEN`` is set, demand ``Authorization: Bearer <token>``;
    raises 401 otherwise. The token is never logged or echoed."""
    expected = request.app.state.settings.api_token
    if expected is None:
        return
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.encode(), expected.get_secret_value().encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong API token",
                            headers={"WWW-Authenticate": "Bearer"})
