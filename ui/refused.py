"""``Refused``: the ``gr.Error`` our event handlers raise to refuse an action, shown to the user as
a notice and logged by Gradio as its message only.

Gradio prints the full traceback of every ``gr.Error`` to the app's console unless it was raised
with ``print_exception=False`` (``gradio/queueing.py``, ``process_events``); a refusal is the app
working as meant (a bad value, a run that is busy), so it gets one log line (``finetune_studio.ui``)
instead of a traceback per click or per raw call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import gradio as gr

from trainer_core.refusals import INVALID_SETTING, as_refusal

log = logging.getLogger("finetune_studio.ui")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` for one log line: control characters (line breaks included) escaped, so a caller's
    value cannot forge log entries; cut to ``limit`` characters."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text)[:limit])


class Refused(gr.Error):
    """``gr.Error`` without the printed traceback; same arguments (``message``, ``duration``,
    ``visible``, ``title``), plus the refusal's request ``fields`` (the widgets the notice marks,
    ``ui.refusals``) and its ``code`` (``trainer_core.refusals``)."""

    def __init__(
        self,
        message: str = "Error raised.",
        *args: Any,
        fields: Iterable[str] = (),
        code: str = INVALID_SETTING,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("print_exception", False)
        super().__init__(message, *args, **kwargs)
        self.fields, self.code = tuple(fields), code
        log.info("refused: %s", one_line(message))

    @classmethod
    def of(cls, error: BaseException) -> Refused:
        """``error`` as a ``Refused``: an engine ``Refusal`` or a pydantic ``ValidationError`` with
        its message, fields and code (``refusals.as_refusal``); anything else with its text alone."""
        refusal = as_refusal(error)
        if refusal is None:
            return cls(str(error))
        return cls(str(refusal), fields=refusal.fields, code=refusal.code)
