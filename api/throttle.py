"""Throttle failed logins per client address: the UI's login form, the API's bearer token (``/api/``,
``/v1/``) and share-link tokens (``/s/``). A call to ``/api/`` or ``/v1/`` without an
``Authorization`` header guesses nothing (a readiness probe): it gets its 401 but is not counted.

After ``limit`` failures from one address within ``window_s`` seconds, further attempts from that
address are answered 429 with ``Retry-After`` (seconds until its oldest failure leaves the window,
so a real user who mistyped waits at most a minute). Each refusal is logged with the address, never
the password or token. A pure ASGI middleware, so streamed responses (SSE) pass through untouched.

Concurrent guesses: an attempt whose outcome is not known yet holds a place (``begin``) until its
answer's status line (``end``), and failures plus attempts in flight may not exceed ``limit``; so of
300 wrong guesses sent at once from one address at most ``limit`` are checked. A request that
carries the API's own token (compared in constant time before it goes on) is known to be no guess
and never waits for a place: a client's parallel calls are not slowed.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Optional

log = logging.getLogger("finetune_studio.access")
LOGIN_PATHS = ("/login", "/login/")
TOKEN_PREFIXES = ("/api/", "/v1/", "/s/")  # a 401 or 403 under these is a wrong token
OPENAI_PREFIXES = ("/v1/", "/s/")  # 429 answers in OpenAI's error shape
SHARE_TOKEN_IN_PATH = re.compile(r"^/s/[^/]*")  # logged as /s/***


class FailureThrottle:
    """Sliding-window count of failures per key (a client address); thread-safe."""

    def __init__(self, limit: int = 5, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window_s, self._clock = limit, window_s, clock
        self._failures: dict[str, deque[float]] = {}
        self._pending: dict[str, int] = {}  # attempts of each key in flight (outcome not known yet)
        self._lock = threading.Lock()

    def _recent(self, key: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(key, deque())
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return failures

    def retry_after(self, key: str) -> Optional[float]:
        """Seconds until ``key`` may try again; None when it may try now."""
        with self._lock:
            now = self._clock()
            failures = self._recent(key, now)
            if len(failures) < self.limit:
                return None
            return max(failures[0] + self.window_s - now, 0.0)

    def begin(self, key: str) -> Optional[float]:
        """Hold a place for an attempt of ``key`` whose outcome is not known yet, or, when its
        failures and the attempts in flight already reach ``limit``, the seconds to wait (until the
        oldest failure leaves the window; 1 s when only attempts in flight fill the places). Every
        ``begin`` that returns None must be followed by one ``end``."""
        with self._lock:
            now = self._clock()
            failures = self._recent(key, now)
            pending = self._pending.get(key, 0)
            if len(failures) + pending >= self.limit:
                if len(failures) >= self.limit:
                    return max(failures[0] + self.window_s - now, 0.0)
                return 1.0
            self._pending[key] = pending + 1
            return None

    def end(self, key: str, failed: bool) -> int:
        """Release the place ``begin`` held; record a failure when ``failed``. Returns the failures
        of ``key`` within the window."""
        with self._lock:
            left = self._pending.get(key, 1) - 1
            if left > 0:
                self._pending[key] = left
            else:
                self._pending.pop(key, None)
        return self.fail(key) if failed else len(self._failures.get(key, ()))

    def fail(self, key: str) -> int:
        """Record a failure; returns the failures of ``key`` within the window."""
        with self._lock:
            now = self._clock()
            failures = self._recent(key, now)
            failures.append(now)
            if len(self._failures) > 10_000:  # bounded memory under an address-spraying attack
                self._failures = {k: v for k, v in self._failures.items() if v}
            return len(failures)

    def succeed(self, key: str) -> None:
        """A correct login clears the address's failures."""
        with self._lock:
            self._failures.pop(key, None)


class ThrottleMiddleware:
    """ASGI middleware applying ``FailureThrottle`` to ``POST /login`` (Gradio's login form: 400 on
    wrong credentials) and to ``/api/*``, ``/v1/*`` (401 on a missing or wrong token) and ``/s/*``
    (403 on a forged, revoked or expired share link). ``vouched(scope)`` tells a request that carries
    the right API token (``server.build_app`` passes ``api.auth``'s check): it passes untouched."""

    def __init__(self, app: Any, throttle: FailureThrottle, vouched: Callable[[dict], bool] = lambda scope: False):
        self.app, self.throttle, self.vouched = app, throttle, vouched

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "")
        is_login = scope["type"] == "http" and scope.get("method") == "POST" and path in LOGIN_PATHS
        is_api = scope["type"] == "http" and path.startswith(TOKEN_PREFIXES)
        if not (is_login or is_api) or (is_api and self.vouched(scope)):
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("unknown", 0))[0]
        wait_s = self.throttle.begin(address)
        if wait_s is not None:
            log.warning(
                "refused %s %s from %s: too many failed logins (retry in %.0f s)",
                scope.get("method"),
                SHARE_TOKEN_IN_PATH.sub("/s/***", path),
                address,
                wait_s,
            )
            await _too_many(send, wait_s, openai_shape=path.startswith(OPENAI_PREFIXES))
            return
        held = [True]
        # A call without any token (a readiness probe, a page before its login) guesses nothing: it is
        # answered 401 but not counted. A share link always carries its token (in the path).
        guessed = path.startswith("/s/") or any(name == b"authorization" for name, _ in scope.get("headers", ()))

        def settle(code: int) -> None:
            if not held[0]:
                return
            held[0] = False
            failed = (is_login and code in (400, 401)) or (is_api and guessed and code in (401, 403))
            count = self.throttle.end(address, failed)
            if failed:
                what = "login" if is_login else "share link" if path.startswith("/s/") else "API token"
                log.warning("failed %s from %s (%d in the last %.0f s)", what, address, count, self.throttle.window_s)
            elif is_login and code == 200:
                self.throttle.succeed(address)

        async def watch(message: dict) -> None:
            if message["type"] == "http.response.start":
                settle(message["status"])  # the outcome is known: the place is free before the body streams
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            settle(0)  # no status line was sent (the app raised or the client left): no failure


async def _too_many(send: Callable, wait_s: float, openai_shape: bool) -> None:
    seconds = str(max(1, math.ceil(wait_s)))
    message = f"too many failed logins from your address; try again in {seconds} s"
    error = {"error": {"message": message, "type": "rate_limit_error", "param": None, "code": "too_many_failures"}}
    body = json.dumps(error if openai_shape else {"detail": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", seconds.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
