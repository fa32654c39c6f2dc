"""The check's time estimate on the page (``ui.preflight_view``): the range and the load beside the point."""

from __future__ import annotations

from types import SimpleNamespace

from trainer_core.preflight.timing import TimeEstimate
from ui.preflight_view import _estimates


def _report(**range_and_load) -> SimpleNamespace:
    timing = TimeEstimate(
        total_seconds=430.0,
        parts_seconds={"startup": 10.0, "train_steps": 420.0},
        tokens_per_second=120.0,
        speed_source="the fp32 matmul rate of this machine",
        **range_and_load,
    )
    return SimpleNamespace(memory=None, time=timing, no_estimates=None)


def test_the_estimate_shows_its_range_and_names_a_high_load():
    assert "range" not in _estimates(_report())  # a steady speed: a point
    busy = _estimates(
        _report(low_seconds=390.0, high_seconds=1480.0, load="the CPU is busy: 7 processes ready to run on 2 cores")
    )
    assert "Run time ≈ 7m 10s</strong> (range 6m 30s – 24m 40s; the CPU is busy: 7 processes ready" in busy
    assert "the slow end if it stays so" in busy
