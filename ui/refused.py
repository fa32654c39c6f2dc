"""``Refused``: the ``gr.Error`` our event handlers raise to refuse an action, shown to the user as
a notice and logged by Gradio as its message only.

Gradio prints the full traceback of every ``gr.Error`` to the app's console unless it was raised
with ``print_exception=False`` (``gradio/queueing.py``, ``process_events``); a refusal is the app
working as meant (a bad value, a run that is busy), so it gets one log line (``finetune_studio.ui``)
instead of a traceback per click or per raw call.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr

log = logging.getLogger("finetune_studio.ui")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` for one log line: control characters (line breaks included) escaped, so a caller's
    value cannot forge log entries; cut to ``limit`` characters."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text)[:limit])


class Refused(gr.Error):
    """``gr.Error`` without the printed traceback; same arguments (``message``, ``duration``,
    ``visible``, ``title``)."""

    def __init__(self, message: str = "Error raised.", *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("print_exception", False)
        super().__init__(message, *args, **kwargs)
        log.info("refused: %s", one_line(message))
