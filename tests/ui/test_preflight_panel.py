"""The Check button's handler (``ui.preflight_panel.check``) with a sampled report: the estimate
first ("estimated from N of M rows"), the exact check's progress bar while it runs, then the exact
report in its place; an exact check that ended says why."""

from __future__ import annotations

import time

from trainer_core.admission.full_pass import FullPassState
from trainer_core.preflight.check import refused_report
from trainer_core.preflight.report import SampleEstimate
from trainer_core.schemas import TrainingStartRequest
from ui import preflight_panel

BASIS = "estimated from 2,100 of 1,000,000 rows: the first 100 and 2,000 drawn at random; ± is a 95 % interval"


def _reports():
    request = TrainingStartRequest(local_datasets=["x.jsonl"])
    estimate = refused_report(request, [], time.perf_counter())
    estimate.estimate = SampleEstimate(
        rows_sampled=2100, rows_total=1_000_000, basis=BASIS, margins={"tokens_trained": 1234.0}, full_pass_id="p1"
    )
    exact = refused_report(request, [], time.perf_counter())
    exact.rows_read = 1_000_000
    return estimate, exact


def _states(exact, ending: str):
    yield FullPassState(id="p1", state="running", elapsed_seconds=3, expected_seconds=10, progress=0.3)
    if ending == "done":
        yield FullPassState(id="p1", state="done", elapsed_seconds=9, expected_seconds=10, progress=1, report=exact)
    else:
        yield FullPassState(
            id="p1", state="ended", elapsed_seconds=9, expected_seconds=10, progress=0.9, message="a newer Check"
        )


def _run(monkeypatch, ending: str) -> list[tuple]:
    estimate, exact = _reports()
    states = _states(exact, ending)
    monkeypatch.setattr(preflight_panel, "_report", lambda ctx, *inputs: estimate)
    monkeypatch.setattr(preflight_panel, "full_pass", lambda pass_id: next(states))
    monkeypatch.setattr(preflight_panel, "POLL_S", 0.0)
    return list(preflight_panel.check(None))


def test_the_estimate_then_progress_then_the_exact_report(monkeypatch) -> None:
    first, running, done = _run(monkeypatch, "done")
    assert (
        "Estimate</strong>: estimated from 2,100 of 1,000,000 rows" in first[1] and "tokens trained ±1,234" in first[1]
    )
    assert '<progress class="pf-full-pass" value="0.300"' in running[1] and "30 %" in running[1]
    assert "Estimate" not in done[1] and "pf-full-pass" not in done[1]


def test_an_ended_exact_check_says_why(monkeypatch) -> None:
    outputs = _run(monkeypatch, "ended")
    assert len(outputs) == 3 and "The exact check ended: a newer Check" in outputs[-1][1]
