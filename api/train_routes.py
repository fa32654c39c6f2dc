"""The training API under ``/api/train``: thin routes over the shared ``JobRunner`` and run history."""

from __future__ import annotations

from typing import Literal, Optional

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from api.auth import require_token
from api.sse import progress_stream
from trainer_core.admission.admit import admit, checked_for_preflight
from trainer_core.admission.full_pass import FullPassState, full_pass
from trainer_core.hardware import HardwareSnapshot, snapshot
from trainer_core.preflight.report import PreflightReport
from trainer_core.refusals import Refusal
from trainer_core.runs import compare
from trainer_core.runs.job import JobRunner
from trainer_core.runs.listing import MAX_PAGE_SIZE, PAGE_SIZE
from trainer_core.runs.store import NAME_MAX_CHARS, NOTE_MAX_CHARS, STATUS_WORDS, RunDetail, RunRecord, RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import MetricHistory, TrainingJobResponse, TrainingProgress, TrainingStatus

router = APIRouter(prefix="/api/train", tags=["training"], dependencies=[Depends(require_token)])


class StopRequest(BaseModel):
    """``save``: stop at the next step and save (true), or cancel at once without saving (false)."""

    save: bool = True


class StopResponse(BaseModel):
    """``idle`` when nothing was running."""

    status: Literal["idle", "stopped"]
    message: Optional[str] = None


class ResetResponse(BaseModel):
    """The runner is idle with an empty live history."""

    status: Literal["idle"] = "idle"
    message: str


class MetricsResponse(BaseModel):
    """Chart series of the current (or last) job and its newest logged values."""

    job_id: Optional[str]
    current: Optional[TrainingProgress]
    history: MetricHistory


def _runner(request: Request) -> JobRunner:
    return request.app.state.runner


def _store(request: Request) -> RunStore:
    return request.app.state.runner.store


@router.post(
    "/start",
    response_model=TrainingJobResponse,
    responses={400: {"description": "A path, output folder, model, dataset or resume target that cannot be used"}},
)
def start(body: TrainingStartRequest, request: Request, runner: JobRunner = Depends(_runner)) -> TrainingJobResponse:
    """Start a job (``queued``), or ``error`` with "already in progress" while one runs. Everything
    that can be checked cheaply is checked first (``trainer_core.admission.admit``): a refusal is a
    400 naming the fields (``api.errors``)."""
    return runner.start(admit(body, request.app.state.settings, runner.store))


@router.post(
    "/preflight",
    response_model=PreflightReport,
    responses={400: {"description": "A path, dataset or setting that cannot be checked"}},
)
def preflight(body: TrainingStartRequest, request: Request, runner: JobRunner = Depends(_runner)) -> PreflightReport:
    """The pre-flight check of a start request (same body as ``/start``), without starting it and
    without loading model weights: rows read / kept / dropped per file, truncation, trained tokens,
    steps, memory and time estimates, warnings and errors (``trainer_core.preflight``). Paths obey
    the same rules as ``/start`` (a 400 names the field). Runs while a job trains, in the check's
    own worker process (``trainer_core.admission.check_worker``: a check that needs more memory than
    its limit is a report with that error). Training files over ``check_sample_mb`` are answered
    from a sample: ``estimate`` says "estimated from N of M rows" and names ``full_pass_id``, the
    exact check running in the background (``GET /preflight/{full_pass_id}``)."""
    from trainer_core.admission.full_pass import first_report

    checked = checked_for_preflight(body, request.app.state.settings, runner.store)
    return first_report(checked, request.app.state.settings, runner.store)


@router.get(
    "/preflight/{full_pass_id}",
    response_model=FullPassState,
    responses={404: {"description": "No such exact check (or it finished long ago)"}},
)
def preflight_full_pass(full_pass_id: str) -> FullPassState:
    """The exact check that follows a sampled ``/preflight``: ``running`` with its progress,
    ``done`` with the exact report (which replaces the estimate), or ``ended`` with why."""
    found = full_pass(full_pass_id)
    if found is None:
        raise Refusal(f"no exact check {full_pass_id}", fields=("full_pass_id",), code="unknown_full_pass", status=404)
    return found


@router.post("/stop", response_model=StopResponse)
def stop(body: StopRequest = StopRequest(), runner: JobRunner = Depends(_runner)) -> StopResponse:
    """Stop the running job (saving by default)."""
    if not runner.stop(save=body.save):
        return StopResponse(status="idle", message="no training job is running")
    verb = "stopping at the next step and saving" if body.save else "cancelling without saving"
    return StopResponse(status="stopped", message=verb)


@router.post("/reset", response_model=ResetResponse, responses={409: {"description": "A job is running"}})
def reset(runner: JobRunner = Depends(_runner)) -> ResetResponse:
    """Back to idle; 409 while a job runs, unless a cancel was asked for (then the worker is ended)."""
    if not runner.reset(end_cancelled=True):
        raise Refusal("a training job is running: stop or cancel it first", code="busy", status=409)
    return ResetResponse(message="reset to idle")


class PrewarmResponse(BaseModel):
    """``ready``: a standby worker has imported the training stack and waits for the next Start."""

    ready: bool


@router.post("/prewarm", response_model=PrewarmResponse)
def prewarm(runner: JobRunner = Depends(_runner)) -> PrewarmResponse:
    """Start importing the training stack in a standby worker now (about 8 s here), so the next
    Start begins loading at once; call it when your form opens, and again to ask if it is ready.
    The standby exits after 10 idle minutes. Does nothing while a job runs."""
    return PrewarmResponse(ready=runner.prewarm())


@router.get("/status", response_model=TrainingStatus)
def status(runner: JobRunner = Depends(_runner)) -> TrainingStatus:
    """Phase, message, details and the chart series."""
    return runner.status()


@router.get("/metrics", response_model=MetricsResponse)
def metrics(runner: JobRunner = Depends(_runner)) -> MetricsResponse:
    """The histories and the current values."""
    return MetricsResponse(
        job_id=runner.status().job_id, current=runner.history.latest(), history=runner.history.series()
    )


@router.get(
    "/progress",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "TrainingProgress events"}},
)
def progress(
    request: Request,
    runner: JobRunner = Depends(_runner),
    last_event_id: Optional[int] = Header(None, alias="Last-Event-ID"),
) -> StreamingResponse:
    """Server-Sent Events: progress / heartbeat / complete / error, each with ``id`` = step."""
    stream = progress_stream(runner, last_event_id, request.app.state.settings.sse_heartbeat_s)
    return StreamingResponse(
        stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


@router.get("/hardware", response_model=HardwareSnapshot)
def hardware() -> HardwareSnapshot:
    """CPU percent, RAM used/total (GiB), each CUDA device's memory (GiB); no GPU is a valid answer."""
    return snapshot()


RunStatusWord = Literal[STATUS_WORDS]  # type: ignore[valid-type]


TOTAL_HEADER = "X-Total-Count"  # GET /runs: how many runs match the filters, beyond the page returned
_INTEGER = {"type": "integer"}


@router.get(
    "/runs",
    response_model=list[RunRecord],
    responses={200: {"headers": {TOTAL_HEADER: {"description": "Runs matching the filters", "schema": _INTEGER}}}},
)
def runs(
    response: Response,
    store: RunStore = Depends(_store),
    name: Optional[str] = Query(None, max_length=200),
    status: Optional[RunStatusWord] = None,
    dataset: Optional[str] = Query(None, max_length=200),
    limit: int = Query(PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE),
    offset: int = Query(0, ge=0, le=10_000_000),
) -> list[RunRecord]:
    """The remembered runs, newest first, that match every filter given: ``name`` is contained in
    the run's name or job id, ``status`` is its state (the phase, or ``cancelled`` /
    ``early_stopped``), ``dataset`` is contained in a dataset path or Hub id (text ignores case).
    One page: at most ``limit`` runs from the ``offset``-th match on (0: the newest); the
    ``X-Total-Count`` header says how many match in all, so a client pages on while
    ``offset + limit`` is below it."""
    found, total = store.runs_page(limit=limit, offset=offset, name=name, status=status, dataset=dataset)
    response.headers[TOTAL_HEADER] = str(total)
    return found


class RunLabel(BaseModel):
    """A run's editable name and note (plain text; omitted or null: unchanged; "": cleared)."""

    model_config = ConfigDict(extra="forbid")

    name: Optional[str] = Field(None, max_length=NAME_MAX_CHARS)
    note: Optional[str] = Field(None, max_length=NOTE_MAX_CHARS)


@router.patch(
    "/runs/{job_id}",
    response_model=RunRecord,
    responses={404: {"description": "Unknown run"}, 422: {"description": "Too long, or a control character"}},
)
def label_run(job_id: str, body: RunLabel, store: RunStore = Depends(_store)) -> RunRecord:
    """Set a run's name and / or note; returns the run (without its metrics)."""
    found = store.set_label(job_id, name=body.name, note=body.note)  # a bad label: a 422 Refusal
    record = store.get_record(job_id) if found else None
    if record is None:
        raise unknown_run(job_id)
    return record


def unknown_run(job_id: str) -> Refusal:
    """The 404 refusal of a job id no run has."""
    return Refusal(f"no run {job_id}", fields=("job_id",), code="unknown_run", status=404)


class CompareResponse(BaseModel):
    """Runs side by side: the settings diff table (``compare.config_diff``: text cells, one column
    per run) and each run's downsampled loss curves (raw, EMA-smoothed, eval; (xs, ys) each)."""

    columns: list[str]
    rows: list[list[str]]
    curves: list[compare.Curve]


@router.get(
    "/runs/compare",
    response_model=CompareResponse,
    responses={404: {"description": "Unknown run"}, 422: {"description": "No, or too many, job ids"}},
)
def compare_runs(
    job_ids: str = Query(..., max_length=2000, description="Comma-separated job ids"),
    x_axis: Literal["step", "tokens"] = "step",
    smoothing: float = Query(0.0, ge=0, le=compare.MAX_SMOOTHING),
    store: RunStore = Depends(_store),
) -> CompareResponse:
    """What the Runs tab's comparison shows, for up to ``compare.MAX_RUNS`` runs: loss against
    steps or input tokens seen, smoothed with TensorBoard's EMA, downsampled; and the settings that
    differ with final loss, best eval loss, training time and tokens/s (and an embedding run's last
    retrieval metrics: eval_ndcg_at_10 ...; "—" for a run without them)."""
    ids = list(dict.fromkeys(j.strip() for j in job_ids.split(",") if j.strip()))
    if not 1 <= len(ids) <= compare.MAX_RUNS:
        raise Refusal(f"give 1 to {compare.MAX_RUNS} job ids, comma-separated", fields=("job_ids",), status=422)
    runs = [store.get_record(j) for j in ids]
    missing = [j for j, r in zip(ids, runs) if r is None]
    if missing:
        raise Refusal(f"no run {missing[0][:60]}", fields=("job_ids",), code="unknown_run", status=404)
    columns, rows = compare.config_diff(runs, compare.final_values(store, runs))
    return CompareResponse(
        columns=columns, rows=rows, curves=compare.curves(compare.SHARED.load(store, runs, x_axis), smoothing)
    )


@router.get("/runs/{job_id}", response_model=RunDetail, responses={404: {"description": "Unknown run"}})
def run(job_id: str, store: RunStore = Depends(_store)) -> RunDetail:
    """One run with its settings and per-step metrics."""
    found = store.get_run(job_id)
    if found is None:
        raise unknown_run(job_id)
    return found
