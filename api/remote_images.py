"""Fetching an ``image_url`` part given as an http(s) URL, for servers that allow it
(``STUDIO_ALLOW_REMOTE_IMAGES``; off by default: the server would request any address a client
names, e.g. one on its own network: SECURITY.md). The answer must be an image (``Content-Type:
image/*``) of at most ``MAX_BYTES``; redirects are not followed."""

from __future__ import annotations

import base64

import httpx

from api.openai_errors import OpenAIError

MAX_BYTES = 15 * 2**20
TIMEOUT_S = 10.0


def fetch_image(url: str) -> str:
    """The image at ``url`` as a ``data:`` URL. Raises OpenAIError 400 when it cannot be fetched
    in ``TIMEOUT_S``, is not an image, or is larger than ``MAX_BYTES``."""
    where = "image_url"
    try:
        with httpx.stream("GET", url, timeout=TIMEOUT_S, follow_redirects=False) as answer:
            kind = answer.headers.get("content-type", "").split(";")[0].strip()
            if answer.status_code != 200 or not kind.startswith("image/"):
                raise OpenAIError(
                    400,
                    f"{where}: {url[:120]} answered {answer.status_code} {kind or '(no type)'}, not an image",
                    param=where,
                )
            body = bytearray()
            for chunk in answer.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise OpenAIError(400, f"{where}: {url[:120]} is larger than {MAX_BYTES // 2**20} MB", param=where)
    except httpx.HTTPError as exc:
        raise OpenAIError(
            400, f"{where}: {url[:120]} could not be fetched ({type(exc).__name__})", param=where
        ) from None
    return f"data:{kind};base64,{base64.b64encode(bytes(body)).decode('ascii')}"
