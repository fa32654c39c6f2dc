"""Progress of the long passes over the data (tokenizing every row), told to whoever listens: the
training worker forwards it to the job thread, so the monitor shows "tokenized 4,000 of 52,002
rows" while a run prepares its data instead of a phase name that does not move.

One listener a process (a worker prepares one dataset at a time); none by default, so the check
and the tests pay only a function call per batch. A pass over several forked processes
(``across_processes``) counts in shared memory, one slot a process and no lock, and a thread of
the process that listens tells the sum: a worker process never calls the listener itself.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

Listener = Callable[[int, int, str], None]  # (rows done, rows in all, what is being done: "tokenizing")
REPORT_EVERY_S = 0.5  # at most this often, besides the last batch of a pass
_listener: Optional[Listener] = None
_last_report = 0.0
_slots: Any = None  # rows done per forked process of the pass under way (``across_processes``)


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


@contextmanager
def across_processes(processes: int, total: int, what: str) -> Iterator[None]:
    """While a pass over ``total`` rows runs on ``processes`` processes forked inside it (rank 0..n-1),
    each adds its rows with ``add_rows``; a thread here tells the sum every ``REPORT_EVERY_S``
    seconds, and the whole when the pass ends without an error."""
    global _slots
    _slots = multiprocessing.RawArray("q", processes)  # inherited by the forked processes
    ended = threading.Event()

    def tell() -> None:
        while not ended.wait(REPORT_EVERY_S):
            rows_done(min(sum(_slots), total - 1), total, what)

    watcher = threading.Thread(target=tell, name="data-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        ended.set()
        watcher.join()
        _slots = None
    rows_done(total, total, what)


def add_rows(rank: int, rows: int) -> None:
    """In process ``rank`` of an ``across_processes`` pass: ``rows`` more rows done."""
    if _slots is not None:
        _slots[rank] += rows
