"""Functions behind the UI's events. They read and command the shared ``JobRunner``; the watching
generators block on the metrics history's change counter, so an idle tab costs nothing and a closed
tab never touches training."""

from __future__ import annotations

import dataclasses
import html
import logging
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import gradio as gr
import pandas as pd
from gradio.components.plot import PlotData

from trainer_core.admission.admit import admit
from trainer_core.refusals import Refusal
from trainer_core.request.rules import training_data_missing
from trainer_core.request.sections import SECTIONS
from trainer_core.runs.job import JobRunner
from trainer_core.runs.metrics import ChartPoints
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import TrainingStatus
from ui import audio_panel, charts, embedding_panel, grpo_charts
from ui.context import Context, dataset_paths
from ui.follow import FOLLOWERS
from ui.form import FORM_FIELDS, build_request, form_values
from ui.monitor_text import status_line
from ui.placeholder_panel import gate as placeholder_gate
from ui.refusals import describe
from ui.refused import Refused
from ui.uploads import EVAL_UPLOAD_LABEL, shown_names

log = logging.getLogger(__name__)
HEARTBEAT_S = 10.0  # a watcher re-renders at least this often (the times keep moving)
CLOCKS_STALE_S = 1.0  # a shared update with counting clocks (before the first step) is rebuilt after this
MIN_REDRAW_S = 0.5  # and at most this often: faster steps are coalesced (each update redraws three Plotly charts)
EMPTY_PREVIEW = pd.DataFrame({"row": [], "preview": []})
NOTICE_CLEAR = ""


def buttons(status: TrainingStatus) -> tuple:
    """Start / Stop (save) / Cancel, each enabled only in the phases where it acts: Start when no
    job runs, Stop while training (it saves at the next step), Cancel while a job is live."""
    running = status.is_training_running
    return (
        gr.update(value="Start", interactive=not running),
        gr.update(interactive=running and status.phase.value == "training"),
        gr.update(interactive=running),
    )


def starting() -> tuple[Any, Any]:
    """The Start button at the click, before the checks answer: disabled and saying so (a second
    click cannot queue a second start); and the pre-flight report folded, so the status and the
    charts are in view for the run (its title stays, one click opens it again)."""
    return gr.update(value="Starting…", interactive=False), gr.update(open=False)


def render(status: TrainingStatus, points: ChartPoints, latest: Optional[Any] = None) -> tuple:
    """Outputs of every watcher: status line, raw status JSON (without the series), the three
    charts already serialised (``PlotData``, what ``gr.Plot`` would make of each figure), the
    rewards chart (a DPO / ORPO / KTO run's preference rewards, a GRPO run's rewards, or an embedding
    run's held-out retrieval metrics: ``grpo_charts.rewards_figure``; hidden for others), a GRPO run's completions chart and sampled completions (``latest``: the newest train
    event, ``ui.grpo_charts``; hidden for others) and the three buttons' states."""
    raw = status.model_dump(mode="json", exclude={"metric_history"})
    figures = (charts.loss_figure(points), charts.learning_rate_figure(points), charts.grad_norm_figure(points))
    plots = [PlotData(type="plotly", plot=fig.to_json()) for fig in figures]
    grpo = grpo_charts.has_grpo_points(points)
    rewards = grpo_charts.rewards_figure(points)
    plots.append(
        gr.update(
            value=PlotData(type="plotly", plot=rewards.to_json()) if rewards else None, visible=rewards is not None
        )
    )
    plots.append(
        gr.update(
            value=PlotData(type="plotly", plot=grpo_charts.rollout_figure(points).to_json()) if grpo else None,
            visible=grpo,
        )
    )
    samples = grpo_charts.samples_html(latest) if grpo else ""
    return (status_line(status), raw, *plots, gr.update(value=samples, visible=bool(samples)), *buttons(status))


class SharedRender:
    """The latest rendered update of one runner, built once per history version and handed to every
    watching tab: 20 tabs cost one build (about 40 ms) per step, not 20 (bench/ui_overhead.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: Optional[int] = None
        self._update: tuple = ()
        self._running = False
        self._clocks_at: Optional[float] = None  # when an update with counting clocks was built (monotonic s)

    def get(self, runner: JobRunner) -> tuple[int, tuple, bool]:
        """(history version, rendered outputs, whether the job is running). An update whose clocks
        count up (before the first step) is rebuilt when over ``CLOCKS_STALE_S`` old, so a tab that
        comes in late starts its clocks from the right second."""
        with self._lock:  # held while building, so tabs woken together wait for one build
            version = runner.history.version
            stale = self._clocks_at is not None and time.monotonic() - self._clocks_at >= CLOCKS_STALE_S
            if version != self._version or stale:
                status = runner.status(with_history=False)
                self._update = render(status, runner.history.chart_points(), runner.history.latest_train())
                self._version, self._running = version, status.is_training_running
                counting = status.is_training_running and status.details.get("step") is None
                self._clocks_at = time.monotonic() if counting else None
            return self._version, self._update, self._running


_SHARED: weakref.WeakKeyDictionary[JobRunner, SharedRender] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared_render(runner: JobRunner) -> SharedRender:
    """The one ``SharedRender`` of ``runner``."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(runner, SharedRender())


def own_copy(update: tuple) -> tuple:
    """``update`` with each property update (a ``gr.update`` dict) copied: Gradio prunes the dict it
    sends and pops its ``value`` (``blocks.postprocess_update_dict``), so every watching tab gets its
    own copy of the tuple ``SharedRender`` shares (shallow: the values themselves are not changed)."""
    return tuple(dict(value) if isinstance(value, dict) and "__type__" in value else value for value in update)


def watch(runner: JobRunner, session: Optional[str] = None) -> Iterator[tuple]:
    """Yield the rendered status now and on every change until the job is no longer running and no
    queued job is about to start (``JobRunner.more_queued``): a tab follows the queue's jobs.
    Updates come at most every ``MIN_REDRAW_S``: a run of 10 steps a second is drawn twice a second
    with every point (the charts read the whole history), so a page on a small machine keeps up.
    ``session`` (the tab's Gradio session id) makes this the tab's one stream: an older stream of
    the same tab ends at its next wake-up (``ui.follow``)."""
    shared = shared_render(runner)
    token = FOLLOWERS.claim(session)
    try:
        while True:
            version, update, running = shared.get(runner)
            drawn = time.monotonic()
            yield own_copy(update)
            if not running and not (runner.more_queued is not None and runner.more_queued()):
                return
            runner.history.wait_for_change(version, HEARTBEAT_S)
            time.sleep(max(0.0, MIN_REDRAW_S - (time.monotonic() - drawn)))
            if not FOLLOWERS.current(session, token):
                return
    finally:
        FOLLOWERS.release(session, token)


def prewarm(runner: JobRunner):
    """Page-load handler: a standby worker imports the training stack while the user fills in the
    form, so Start begins loading at once (``JobRunner.prewarm``)."""

    def handler() -> None:
        runner.prewarm()

    return handler


def start(
    ctx: Context,
    upload: Optional[str],
    paths_text: str,
    eval_upload: Optional[str],
    eval_text: str,
    *values: Any,
    session: Optional[str] = None,
) -> Iterator[tuple]:
    """Check the form and the paths, start the job and stream its status as (*monitor, notice).
    A refusal (bad setting, path outside the allowed folders, missing file, a job already running)
    leaves the monitor as it is and says why in the notice beside the button (plus a toast),
    with the field's on-screen label (``ui.refusals``). ``session``: the tab (``watch``). After the
    form's values may come the page's placeholder names and its *Train with them as they are* box
    (``placeholder_panel.gate``; API clients leave them out)."""
    values, placeholders = values[: len(FORM_FIELDS)], values[len(FORM_FIELDS) :]
    try:
        if placeholders:
            placeholder_gate(*placeholders)
        request = form_request(ctx, upload, paths_text, eval_upload, eval_text, values)
    except gr.Error as exc:
        yield refused(ctx, exc)
        return
    yield from start_request(ctx, request, session)


NO_DATA_FIX = f"upload a file or type its path on the server (or name a Hub dataset under {SECTIONS['data'].form})"


def form_request(
    ctx: Context, upload: Optional[str], paths_text: str, eval_upload: Optional[str], eval_text: str, values: tuple
) -> TrainingStartRequest:
    """The form (dataset upload / paths, evaluation upload / paths, ``FORM_FIELDS`` values in
    order) as a validated request. Raises ``gr.Error`` naming the field (no training data, a bad
    upload, an invalid setting)."""
    train_files = dataset_paths(upload, paths_text, ctx.settings)
    hub = dict(zip(FORM_FIELDS, values)).get("hf_dataset")
    if problem := training_data_missing(train_files, hub, NO_DATA_FIX):
        raise Refused(f"local_datasets: {problem}", fields=("local_datasets",), code="no_training_data")
    eval_files = dataset_paths(eval_upload, eval_text, ctx.settings, EVAL_UPLOAD_LABEL)
    form = audio_panel.applied(embedding_panel.applied(dict(zip(FORM_FIELDS, values)), ctx.settings), ctx.settings)
    return build_request(form, train_files, eval_files)


def refused(ctx: Context, refusal: BaseException | str, action: str = "Not started") -> tuple:
    """(*monitor, notice) of a refused start (a refusal, a ``Refused`` or a message): the monitor
    untouched (its buttons set for the current job), the notice naming its fields by their labels
    and marking them (``ui.refusals.describe``), and a toast."""
    refusal = describe(refusal)
    refusal = dataclasses.replace(refusal, text=shown_names(refusal.text, ctx.settings))  # as the preview names files
    gr.Warning(f"{action}: {html.escape(refusal.text)}", duration=6)  # toasts render HTML
    status = ctx.runner.status(with_history=False)
    return (*[gr.skip()] * MONITOR_VIEWS, *buttons(status), refusal.html(action))


MONITOR_VIEWS = 8  # status line, raw JSON, five charts, GRPO samples (then the three buttons)


def begin(ctx: Context, request: TrainingStartRequest) -> Optional[Refusal]:
    """Check ``request`` as the API does (``admission.admit``) and start it: None once the job
    started, else why it was refused (a ``Refusal`` in the engine's words, with its fields;
    ``describe`` puts them in the page's)."""
    try:
        checked = admit(request, ctx.settings, ctx.runner.store)
    except Refusal as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - the page says what went wrong, never a traceback
        log.exception("checking a start failed")
        return Refusal(
            f"the settings could not be checked ({type(exc).__name__}: {exc}); try again", code="check_failed"
        )
    response = ctx.runner.start(checked)
    if response.status == "error":
        return Refusal(f"{response.message} {response.error or ''}".strip(), code="busy", status=409)
    return None


def start_request(ctx: Context, request: TrainingStartRequest, session: Optional[str] = None) -> Iterator[tuple]:
    """``begin`` ``request``, then stream (*monitor, notice) updates: the notice cleared by the
    first, left alone after. A refusal yields ``refused``'s update; when another job runs, this tab
    then follows that job (its monitor may have stopped watching when it was idle)."""
    problem = begin(ctx, request)
    if problem is not None:
        yield refused(ctx, problem)
        if ctx.runner.status(with_history=False).is_training_running:  # busy: follow the job that has the machine
            for update in watch(ctx.runner, session):
                yield (*update, gr.skip())
        return
    notice: Any = NOTICE_CLEAR
    for update in watch(ctx.runner, session):
        yield (*update, notice)
        notice = gr.skip()


def restore_form(ctx: Context) -> list[Any]:
    """Page load: while a job runs, the form shows that job's settings and data files (so a reload
    mid-run does not show defaults); otherwise every widget is left as it is. Returns [train upload,
    server paths, eval upload, eval paths, *form widgets]: a file the job got as an upload (kept in
    the uploads folder) goes back into its upload box, where it was chosen and where the next upload
    replaces it, never into the paths box beside the next upload."""
    status = ctx.runner.status(with_history=False)
    run = (
        ctx.runner.store.get_run(status.job_id)
        if status.is_training_running and status.job_id and ctx.runner.store
        else None
    )
    if run is None:
        return [gr.skip()] * (4 + len(FORM_FIELDS))
    request = dict(run.request)
    uploads = [_uploaded(request, name, ctx.settings.uploads_dir) for name in ("local_datasets", "local_eval_datasets")]
    paths, eval_paths, *widgets = form_values(request)
    return [uploads[0], paths, uploads[1], eval_paths, *widgets]


def _uploaded(request: dict[str, Any], name: str, uploads_dir: Path) -> Optional[str]:
    """The first of ``request[name]``'s files that is a kept upload (in ``uploads_dir``), taken out
    of the list (one upload box holds one file); None when none is."""
    files = list(request.get(name) or [])
    folder = Path(uploads_dir).resolve()
    found = next((f for f in files if Path(f).resolve().parent == folder and Path(f).is_file()), None)
    if found is not None:
        files.remove(found)
        request[name] = files
    return found


def hardware_line(ctx: Context) -> str:
    """The live hardware panel: CPU %, RAM, each GPU's memory, and the job's tokens/s."""
    from trainer_core.hardware import cached_snapshot

    snap = cached_snapshot()
    parts = [
        f"CPU {snap.cpu_percent:.0f} % of {snap.cpu_count} cores",
        f"RAM {snap.ram_used_gib:.1f} / {snap.ram_total_gib:.1f} GiB",
    ]
    parts += [f"GPU {g.index} {g.name}: {g.memory_used_gib:.1f} / {g.memory_total_gib:.1f} GiB" for g in snap.gpus]
    if not snap.gpus:
        parts.append("no GPU")
    status = ctx.runner.status(with_history=False)
    if status.is_training_running and status.details.get("tokens_per_second"):
        parts.append(f"{status.details['tokens_per_second']:.0f} tokens/s")
    return " · ".join(parts)


def stop(ctx: Context) -> None:
    """Stop at the next step and save."""
    if not ctx.runner.stop(save=True):
        gr.Info("No training job is running.")


def cancel(ctx: Context) -> None:
    """End the worker now; nothing is saved."""
    if not ctx.runner.stop(save=False):
        gr.Info("No training job is running.")
