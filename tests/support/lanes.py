"""The lanes of the suite and what each took, printed at the end of every run (pytest plugin).

The quick lane is ``-m "not slow and not real_model and not browser"`` (run it after every
change); the ``slow`` lane holds the tiny-model tests that start processes which import the training
stack (the CLI, the launched app, torchrun ranks, export workers: about 9 s of CPU each on a 2-core
machine before any work), the ``real_model`` lane the tests whose point is the real SmolLM2's
outputs, the ``browser`` lane the page driven in Chromium. One ``python3 -m pytest`` runs all four
at once under pytest-xdist, so a lane's wall time is the span from its first test's start to its last test's
end, and its test time the sum of its tests' durations (setup and teardown included).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

LANES = ("quick", "slow", "real_model", "browser")


def lane_of(keywords) -> str:
    """``browser`` before ``real_model`` (a page test on the real model is a browser test), then
    ``real_model``, then ``slow``."""
    for lane in ("browser", "real_model", "slow"):
        if lane in keywords:
            return lane
    return "quick"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per lane: tests, wall span and summed test time (seconds)."""
    spans: dict[str, list[float]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, set[str]] = defaultdict(set)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport):
                continue
            lane = lane_of(report.keywords)
            spans[lane] += [report.start, report.stop]
            seconds[lane] += report.duration
            tests[lane].add(report.nodeid)
    if not tests:
        return
    terminalreporter.section("lanes")
    for lane in LANES:
        if tests[lane]:
            wall = max(spans[lane]) - min(spans[lane])
            terminalreporter.write_line(
                f"{lane:<11} {len(tests[lane]):4d} tests  wall {wall:7.1f} s  test time {seconds[lane]:7.1f} s"
            )
