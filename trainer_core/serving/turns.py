"""First come, first served: one holder at a time, the others wait in the order they arrived
(``threading.Lock`` promises no order)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Turns:
    """A FIFO lock: ``with turns.turn(): ...``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next_ticket = 0  # handed to the next arrival
        self._serving = 0  # the ticket whose turn it is

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this caller's turn, hold it for the block, then pass it on."""
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            while ticket != self._serving:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._cond.notify_all()

    def waiting(self) -> int:
        """How many callers hold or wait for a turn."""
        with self._cond:
            return self._next_ticket - self._serving
