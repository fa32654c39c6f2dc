"""The lanes of the suite and what each took, printed at the end of every run (pytest plugin).

The quick lane is ``-m "not real_model and not browser"`` (run it after every change); the
``real_model`` lane holds the tests whose point is the real SmolLM2's outputs, the ``browser``
lane the page driven in Chromium. One ``python3 -m pytest`` runs all three at once under
pytest-xdist, so a lane's wall time is the span from its first test's start to its last test's
end, and its test time the sum of its tests' durations (setup and teardown included).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

LANES = ("quick", "real_model", "browser")


def lane_of(keywords) -> str:
    """``browser`` before ``real_model`` (a page test on the real model is a browser test)."""
    if "browser" in keywords:
        return "browser"
    return "real_model" if "real_model" in keywords else "quick"


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
