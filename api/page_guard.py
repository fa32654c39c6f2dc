"""Keep the API description off the login page, and put the page's early script first in it.

Gradio 6.31 writes the full description of every event (``window.gradio_api_info``) into each page
it serves, also the login page that anyone can open. With a login configured, this ASGI middleware
replaces it with an empty description in HTML answers to visitors who are not logged in, on every
path (Gradio serves the page under unknown ``/gradio_api/...`` paths too, e.g. ``/gradio_api/runs``);
the page fetches nothing else before the login (``/config`` and ``/gradio_api/info`` are behind it).

``head_script`` (``ui.page_assets.EARLY_SCRIPT``) goes right after ``<head>`` in every Gradio page
(not the share links' own pages under ``/s/``), logged in or not: Gradio adds ``Blocks(head=...)`` only after its own modules have run, too late for a script
that must change what they read when they load.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

API_INFO = re.compile(rb"window\.gradio_api_info = .*?;</script>", re.DOTALL)
EMPTY_INFO = b'window.gradio_api_info = {"named_endpoints": {}, "unnamed_endpoints": {}};</script>'


class ApiInfoGuard:
    """ASGI middleware: for GET requests of visitors for whom ``is_logged_in(request)`` is false,
    HTML answers lose their API description. Other requests pass through untouched (streamed)."""

    def __init__(self, app: Any, is_logged_in: Callable[[Request], bool], head_script: bytes = b"") -> None:
        self.app, self.is_logged_in, self.head_script = app, is_logged_in, head_script

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or scope.get("method") != "GET"
            or path.startswith("/api/")  # FastAPI's JSON routes; Gradio's (/gradio_api/...) can serve the page too
            or path.startswith("/s/")  # share links' own pages (``api.share_routes``): no Gradio in them
        ):
            await self.app(scope, receive, send)
            return
        guest = not self.is_logged_in(Request(scope))
        if not guest and not self.head_script:
            await self.app(scope, receive, send)
            return
        start: dict = {}
        chunks: list[bytes] = []

        async def buffer(message: dict) -> None:
            if message["type"] == "http.response.start":
                if not _is_html(message):
                    await send(message)  # not a page: streamed as it is
                    return
                start.update(message)
                return
            if not start or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                await _send_cleaned(send, start, b"".join(chunks), guest, self.head_script)

        await self.app(scope, receive, buffer)


def _is_html(start: dict) -> bool:
    return any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in start.get("headers", []))


async def _send_cleaned(send: Callable, start: dict, body: bytes, guest: bool, head_script: bytes) -> None:
    if guest:
        body = API_INFO.sub(lambda _: EMPTY_INFO, body, count=1)
    if head_script:
        body = body.replace(b"<head>", b"<head>" + head_script, 1)
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body})
