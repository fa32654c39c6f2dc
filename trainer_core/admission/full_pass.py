"""The app's check of large data: the sampled estimate at once, the exact check in the background.

``first_report`` answers the API's ``/preflight`` and the page's Check: for training files that
``preflight.sampled.wants_sample`` picks, the estimate from a sample (in the check worker), and an
exact check of every row started in a second worker of its own (``CheckWorker``, so the next Check
and Start are not held up behind it); otherwise the exact check, as before. ``full_pass(id)`` says
how the exact check is going: running (with its progress, by the sample's tokenizing rate),
done (its report, which replaces the estimate; a bad row anywhere in the data is an error of it
naming the row), or ended. One exact check runs at a time: a newer Check's replaces an older one.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

from trainer_core.admission.check_worker import CheckWorker, check_report, checker
from trainer_core.preflight.report import PreflightReport
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings

FULL_TIMEOUT_S = 4 * 3600.0  # an exact check that takes longer is ended
KEPT = 16  # finished exact checks kept for polling
SUPERSEDED = "a newer Check replaced this exact check"


class FullPassState(BaseModel):
    """An exact check that follows a sampled one: ``state``, seconds since it began,
    ``expected_seconds`` (from the sample's tokenizing rate; ``progress`` is their ratio, at most
    0.99 until done) and, when ``done``, the exact ``report``; ``message`` says why it ``ended``."""

    id: str
    state: Literal["running", "done", "ended"]
    elapsed_seconds: float
    expected_seconds: float
    progress: float = Field(ge=0, le=1)
    report: Optional[PreflightReport] = None
    message: Optional[str] = None


@dataclass
class _Pass:
    id: str
    expected_s: float
    started: float = field(default_factory=time.monotonic)
    ended_at: Optional[float] = None
    report: Optional[PreflightReport] = None
    message: Optional[str] = None

    def state(self) -> FullPassState:
        now = self.ended_at or time.monotonic()
        elapsed = now - self.started
        state = "done" if self.report is not None else "ended" if self.message else "running"
        progress = 1.0 if state == "done" else min(0.99, elapsed / max(self.expected_s, 1e-3))
        return FullPassState(
            id=self.id,
            state=state,
            elapsed_seconds=round(elapsed, 1),
            expected_seconds=round(self.expected_s, 1),
            progress=round(progress, 3),
            report=self.report,
            message=self.message,
        )


_lock = threading.Lock()
_passes: dict[str, _Pass] = {}
_worker = CheckWorker(timeout_s=FULL_TIMEOUT_S)


def first_report(
    request: TrainingStartRequest, settings: Settings, store: Any = None, follow: bool = True
) -> PreflightReport:
    """The sampled report with ``estimate.full_pass_id`` set (no exact check started unless
    ``follow``: Start's folded recheck, whose data stage reads every row anyway), or the exact
    report (see the module)."""
    from trainer_core.preflight.sampled import wants_sample

    if wants_sample(request, settings):
        report = checker().sampled(request, settings, store)
        if report is not None and report.estimate is not None:
            if follow:
                report.estimate.full_pass_id = _start(request, settings, store, _expected_seconds(report))
            return report
    return check_report(request, settings, store)


def full_pass(pass_id: str) -> Optional[FullPassState]:
    """The exact check ``pass_id``'s state, or None when there is no such check (or it is long gone)."""
    with _lock:
        found = _passes.get(pass_id)
        return found.state() if found is not None else None


def _expected_seconds(report: PreflightReport) -> float:
    """The exact check's expected time: the time estimate's tokenizing part (the sample's tokenizing
    rate over every row) where there is one, else the sample's check time per row over every row
    (its fixed costs included, so on the long side)."""
    tokenize = report.time.parts_seconds.get("tokenize") if report.time is not None else None
    if tokenize:
        return float(tokenize)
    share = report.estimate.rows_total / max(1, report.estimate.rows_sampled)  # type: ignore[union-attr]
    return report.check_seconds * share


def _start(request: TrainingStartRequest, settings: Settings, store: Any, expected_s: float) -> str:
    job = _Pass(uuid.uuid4().hex[:12], expected_s)
    with _lock:
        running = [p for p in _passes.values() if p.report is None and p.message is None]
        for old in running:
            old.message, old.ended_at = SUPERSEDED, time.monotonic()
        _passes[job.id] = job
        for stale in list(_passes)[:-KEPT]:
            del _passes[stale]
    if running:
        _worker.interrupt()  # ends the older exact check now; its thread sees it stopped
    threading.Thread(target=_run, args=(job, request, settings, store), daemon=True, name="full-check").start()
    return job.id


def _run(job: _Pass, request: TrainingStartRequest, settings: Settings, store: Any) -> None:
    """The exact check in the full-pass worker; its report (or why it ended) into ``job``."""
    try:
        report = _worker.report(request, settings, store)
    except Exception as exc:  # noqa: BLE001 - said to whoever polls; the worker has logged a bug
        report, reason = None, f"the exact check failed ({type(exc).__name__}: {exc})"
    else:
        reason = None
    with _lock:
        if job.message is None:
            job.report, job.message, job.ended_at = report, reason, time.monotonic()


def full_worker() -> CheckWorker:
    """The exact checks' worker (for tests: ``close``)."""
    return _worker


__all__ = ["FullPassState", "first_report", "full_pass", "full_worker"]
