"""One live monitor stream per browser tab.

A tab's monitor is fed by a generator event (page load, Start, a refused Start, Add to queue,
Resume). Each of them follows the job for as long as it runs, so without a rule a tab that pressed
Add twice while a job trained would hold two streams, each redrawing the three charts on every
step: twice the browser work for the same picture, enough to starve a page on a 2-core machine.
``Followers`` keeps the newest stream of each Gradio session (``gr.Request.session_hash``) and
tells the older ones to end at their next wake-up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Optional

import gradio as gr


class Followers:
    """Which stream of each session is current. Thread-safe; holds one entry per session that has a
    live stream (an entry is dropped when its current stream ends)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, int] = {}
        self._issued = 0

    def claim(self, session: Optional[str]) -> Optional[int]:
        """Make a new stream of ``session`` the current one; returns its token (``None`` without a
        session: such a stream is never superseded)."""
        if not session:
            return None
        with self._lock:
            self._issued += 1
            self._latest[session] = self._issued
            return self._issued

    def current(self, session: Optional[str], token: Optional[int]) -> bool:
        """Whether the stream holding ``token`` is still its session's newest."""
        if token is None:
            return True
        with self._lock:
            return self._latest.get(session) == token

    def release(self, session: Optional[str], token: Optional[int]) -> None:
        """The stream holding ``token`` ended: forget the session unless a newer stream holds it."""
        if token is None:
            return
        with self._lock:
            if self._latest.get(session) == token:
                del self._latest[session]

    def __len__(self) -> int:
        with self._lock:
            return len(self._latest)


FOLLOWERS = Followers()


def session_of(request: Any) -> Optional[str]:
    """The Gradio session id of ``request`` (a ``gr.Request``), or ``None`` (direct calls, tests)."""
    return getattr(request, "session_hash", None) or None


def tab_bound(stream: Callable[..., Iterator[Any]], *bound: Any) -> Callable[..., Iterator[Any]]:
    """``stream(*bound, *inputs, session=<the tab's session id>)`` as a Gradio event handler.
    Gradio fills a parameter typed ``gr.Request`` and reads type hints from a plain function only
    (a ``functools.partial`` hides them); it fills positional parameters before ``*inputs``, so
    the request comes first."""

    def handler(tab: gr.Request, *inputs: Any) -> Iterator[Any]:
        yield from stream(*bound, *inputs, session=session_of(tab))

    return handler
