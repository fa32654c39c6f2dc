"""Functions behind the UI's events. They read and command the shared ``JobRunner``; the watching
generators block on the metrics history's change counter, so an idle tab costs nothing and a closed
tab never touches training."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import gradio as gr
import pandas as pd
from gradio.components.plot import PlotData

from trainer_core.access.admission import REFUSALS, admit
from trainer_core.data.files import DatasetError
from trainer_core.runs.job import JobRunner
from trainer_core.runs.metrics import ChartPoints
from trainer_core.access.paths import confine
from trainer_core.schemas import FormatType, TrainingStartRequest, TrainingStatus
from trainer_core.settings import Settings
from ui import charts
from trainer_core.fieldmeta import parse_mapping
from ui.form import FORM_FIELDS, build_request
from ui.uploads import UPLOAD_LABEL, keep_upload, received_upload

HEARTBEAT_S = 10.0
EVAL_UPLOAD_LABEL = "Evaluation dataset (upload, optional)"
EMPTY_PREVIEW = pd.DataFrame({"row": [], "preview": []})  # a watcher re-renders at least this often (elapsed time keeps moving)


def _clock(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def status_line(status: TrainingStatus) -> str:
    """Markdown: phase, step / total, percent, elapsed, ETA, last loss, then the message/error."""
    d = status.details
    parts = [f"**{status.phase.value}**"]
    if d.get("step") is not None:
        total = d.get("total_steps") or 0
        parts.append(f"step {d['step']} / {total} ({100 * d['step'] / max(total, 1):.0f}%)")
        parts.append(f"elapsed {_clock(d.get('elapsed_seconds'))}")
        if status.is_training_running:
            parts.append(f"ETA {_clock(d.get('eta_seconds'))}")
        if d.get("loss") is not None:
            parts.append(f"loss {d['loss']:.4f}")
    if d.get("truncated_rows") or d.get("dropped_rows"):
        parts.append(f"{d.get('truncated_rows', 0)} of {d.get('rows', 0) + d.get('dropped_rows', 0)} rows truncated "
                     f"to {d.get('max_seq_length')} tokens, {d.get('dropped_rows', 0)} dropped")
    text = " · ".join(parts) + f"\n\n{status.message}"
    if status.error:
        text += f"\n\n**Error:** {status.error}"
    return text


def render(status: TrainingStatus, points: ChartPoints) -> tuple:
    """Outputs of every watcher: status line, raw status JSON (without the series), and the three
    charts already serialised (``PlotData``, what ``gr.Plot`` would make of each figure)."""
    raw = status.model_dump(mode="json", exclude={"metric_history"})
    figures = (charts.loss_figure(points), charts.learning_rate_figure(points), charts.grad_norm_figure(points))
    return (status_line(status), raw, *(PlotData(type="plotly", plot=fig.to_json()) for fig in figures))


class SharedRender:
    """The latest rendered update of one runner, built once per history version and handed to every
    watching tab: 20 tabs cost one build (about 40 ms) per step, not 20 (bench/ui_overhead.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: Optional[int] = None
        self._update: tuple = ()
        self._running = False

    def get(self, runner: JobRunner) -> tuple[int, tuple, bool]:
        """(history version, rendered outputs, whether the job is running)."""
        with self._lock:  # held while building, so tabs woken together wait for one build
            version = runner.history.version
            if version != self._version:
                status = runner.status(with_history=False)
                self._update = render(status, runner.history.chart_points())
                self._version, self._running = version, status.is_training_running
            return self._version, self._update, self._running


_SHARED: "weakref.WeakKeyDictionary[JobRunner, SharedRender]" = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared_render(runner: JobRunner) -> SharedRender:
    """The one ``SharedRender`` of ``runner``."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(runner, SharedRender())


def watch(runner: JobRunner) -> Iterator[tuple]:
    """Yield the rendered status now and on every change until the job is no longer running."""
    shared = shared_render(runner)
    while True:
        version, update, running = shared.get(runner)
        yield update
        if not running:
            return
        runner.history.wait_for_change(version, HEARTBEAT_S)


def prewarm(runner: JobRunner):
    """Page-load handler: a standby worker imports the training stack while the user fills in the
    form, so Start begins loading at once (``JobRunner.prewarm``)."""

    def handler() -> None:
        runner.prewarm()

    return handler


@dataclass(frozen=True)
class Context:
    """What every handler works on: the one runner and the app's settings."""

    runner: JobRunner
    settings: Settings
    tasks: Optional[Any] = None  # trainer_core.tasks.runner.TaskRunner (exports, evaluations)


def split_paths(text: str) -> list[str]:
    """Comma- or newline-separated paths typed in a textbox."""
    return [p.strip() for p in (text or "").replace("\n", ",").split(",") if p.strip()]


def dataset_paths(upload: Optional[str], paths_text: str, settings: Settings, label: str = UPLOAD_LABEL) -> list[str]:
    """The uploaded file (kept) plus each path typed in; ``label`` names the upload field in errors."""
    kept = keep_upload(upload, settings, label)
    return ([kept] if kept else []) + split_paths(paths_text)


def preview(ctx: Context, upload: Optional[str], paths_text: str, format_type: str,
            mapping_text: str) -> tuple[str, pd.DataFrame]:
    """Detected format and the first rows as parsed, for the uploaded file or the first typed
    path (confined to the allowed folders); problems shown inline."""
    from trainer_core.data.prepare import preview as preview_rows

    typed = split_paths(paths_text)
    if not upload and not typed:
        return "Choose a dataset file or type its path.", EMPTY_PREVIEW.copy()
    try:
        received = received_upload(upload, ctx.settings)
        first = str(received) if received else str(confine(typed[0], ctx.settings.allowed_roots, "dataset path"))
        fmt, frame = preview_rows(first, rows=5, format_type=FormatType(format_type), mapping=parse_mapping(mapping_text))
    except gr.Error as exc:
        return f"**Cannot use this dataset:** {exc.message}", EMPTY_PREVIEW.copy()
    except (DatasetError, ValueError, OSError) as exc:
        return f"**Cannot use this dataset:** {exc}", EMPTY_PREVIEW.copy()
    return f"Detected format: **{fmt.value}** ({Path(first).name})", frame


def start(ctx: Context, upload: Optional[str], paths_text: str, eval_upload: Optional[str], eval_text: str,
          *values: Any) -> Iterator[tuple]:
    """Validate the form and the paths, start the job and stream its status; ``gr.Error`` for bad
    settings, paths outside the allowed folders, missing files, or a job already running."""
    train_files = dataset_paths(upload, paths_text, ctx.settings)
    eval_files = dataset_paths(eval_upload, eval_text, ctx.settings, EVAL_UPLOAD_LABEL)
    request = build_request(dict(zip(FORM_FIELDS, values)), train_files, eval_files)
    yield from start_request(ctx, request)


def start_request(ctx: Context, request: TrainingStartRequest) -> Iterator[tuple]:
    """Start ``request`` after the same checks as the API (``admission.admit``), then stream its status."""
    try:
        checked = admit(request, ctx.settings, ctx.runner.store)
    except REFUSALS as exc:
        raise gr.Error(str(exc)) from None
    response = ctx.runner.start(checked)
    if response.status == "error":
        raise gr.Error(f"{response.message} {response.error or ''}".strip())
    yield from watch(ctx.runner)


def stop(ctx: Context) -> None:
    """Stop at the next step and save."""
    if not ctx.runner.stop(save=True):
        gr.Info("No training job is running.")


def cancel(ctx: Context) -> None:
    """End the worker now; nothing is saved."""
    if not ctx.runner.stop(save=False):
        gr.Info("No training job is running.")
