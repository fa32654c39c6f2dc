"""Progress of the long passes over the data (tokenizing every row), told to whoever listens: the
training worker forwards it to the job thread, so the monitor shows "tokenized 4,000 of 52,002
rows" while a run prepares its data instead of a phase name that does not move.

One listener a process (a worker prepares one dataset at a time); none by default, so the check
and the tests pay only a function call per batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Optional

Listener = Callable[[int, int, str], None]  # (rows done, rows in all, what is being done: "tokenizing")
REPORT_EVERY_S = 0.5  # at most this often, besides the last batch of a pass
_listener: Optional[Listener] = None
_last_report = 0.0


def listen(listener: Optional[Listener]) -> None:
    """Send this process's data progress to ``listener`` from now on (None: to nobody)."""
    global _listener
    _listener = listener


def rows_done(done: int, total: int, what: str) -> None:
    """``done`` of ``total`` rows have been through ``what``; passed on at most every
    ``REPORT_EVERY_S`` seconds, and always when the pass is complete. A listener's failure never
    stops the pass."""
    global _last_report
    if _listener is None:
        return
    now = time.monotonic()
    if done < total and now - _last_report < REPORT_EVERY_S:
        return
    _last_report = now
    try:
        _listener(done, total, what)
    except Exception:  # noqa: BLE001 - progress is a nicety: the data pass goes on
        pass
