"""The page's polling timers, paced by what runs: every few seconds while a job or task runs, every
``IDLE_EVERY_S`` (or not at all) while nothing does, so an idle tab costs its browser next to
nothing (issue 53: an idle Train or Chat tab used 13 to 38 % of a core; ``bench/idle_page.py``).
A timer's own handler returns its next pace, so it speeds up within one idle period of a job that
another tab or the API started, and slows down once that job ends."""

from __future__ import annotations

from typing import Any, Optional

import gradio as gr

IDLE_EVERY_S = 30.0  # an idle page's check for a job or task started elsewhere


def pace(busy: bool, every_s: float, idle_s: Optional[float] = IDLE_EVERY_S) -> Any:
    """The update of a ``gr.Timer``: a tick every ``every_s`` while ``busy``; every ``idle_s`` while
    not (None: stopped until an event starts it again)."""
    if busy:
        return gr.update(value=every_s, active=True)
    return gr.update(value=idle_s, active=True) if idle_s else gr.update(active=False)
