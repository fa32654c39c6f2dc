"""The page's timers are paced by what runs (``ui.timers.pace``)."""

from __future__ import annotations

from ui.timers import IDLE_EVERY_S, pace


def test_fast_while_busy_slow_or_stopped_while_idle():
    assert pace(True, 2.0) == {"__type__": "update", "value": 2.0, "active": True}
    assert pace(False, 2.0) == {"__type__": "update", "value": IDLE_EVERY_S, "active": True}
    assert pace(False, 3.0, None) == {"__type__": "update", "active": False}
    assert IDLE_EVERY_S >= 10 * 2.0  # idle: at least ten times fewer ticks than while busy
