"""Functions behind the Runs tab: list, inspect, load settings back, resume, delete.

(No ``from __future__ import annotations`` here: Gradio finds the ``gr.SelectData`` parameter by
its evaluated annotation.)"""

import html
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import gradio as gr
import pandas as pd

from trainer_core.model_kind import kinds
from trainer_core.runs.compare import FINAL_SERIES
from trainer_core.runs.metrics import chart_points_of
from trainer_core.runs.store import RunDetail, RunRecord, status_word
from trainer_core.runs.write_folders import delete_run
from trainer_core.schemas import TrainingStartRequest
from trainer_core.serving.engine import ChatEngine
from trainer_core.vocabulary import LIVE_PHASES, RESUMABLE_PHASES
from ui import charts, grpo_charts
from ui.chat_handlers import newest_run
from ui.context import Context
from ui.form import FORM_FIELDS, form_values
from ui.monitor_text import clock
from ui.refusals import notice_html
from ui.refused import Refused
from ui.run_filters import ALL_STATUSES, RUNS_PAGE, list_filters, more_rows, shown_count
from ui.train_handlers import NOTICE_CLEAR, begin, refused, watch

RUN_COLUMNS = [
    "job_id",
    "name",
    "created",
    "status",
    "model",
    "dataset",
    "method",
    "steps",
    "final_loss",
    "tokens/s (avg)",
    "training time",
    "wall time",
    "evaluation",
]
NO_RUN = "Click a run in the table to see its charts and settings."
_PUNCTUATION = re.compile(r"([!-%'-/:;=?@\[-`{-~])")  # ASCII punctuation but & < > (those become entities)


def literal_markdown(text: str) -> str:
    """User ``text`` (a run's name or note) shown literally in a Markdown component: every ASCII
    punctuation mark backslash-escaped (CommonMark allows it for all of them, so no emphasis, link,
    heading, list or code), ``& < >`` as HTML entities, each line stripped (no indented code) and
    lines joined by hard breaks, blank lines dropped."""
    lines = [line.strip() for line in text.splitlines()]
    return "  \n".join(html.escape(_PUNCTUATION.sub(r"\\\1", line), quote=False) for line in lines if line)


def _eval_text(result: Optional[dict]) -> str:
    """The newest evaluation's tuned scores in a few characters (perplexity, ROUGE-L; nDCG@10; WER;
    valid calls)."""
    tuned = (result or {}).get("tuned") or {}
    parts = []
    if tuned.get("perplexity") is not None:
        parts.append(f"ppl {tuned['perplexity']:.2f}")
    if tuned.get("rouge_l") is not None:
        parts.append(f"ROUGE-L {tuned['rouge_l']:.3f}")
    if tuned.get("ndcg_at_10") is not None:  # an embedding model's retrieval
        parts.append(f"nDCG@10 {tuned['ndcg_at_10']:.3f}")
    if tuned.get("wer") is not None:  # a speech-to-text model's transcripts
        parts.append(f"WER {tuned['wer']:.3f}")
    if tuned.get("valid_call_rate") is not None:  # held-out rows with tools
        parts.append(f"valid calls {tuned['valid_call_rate']:.2f}")
    return " · ".join(parts)


def _evaluations(ctx: Context) -> dict[str, str]:
    """job id -> the newest completed evaluation's scores, for the Runs table."""
    if ctx.tasks is None:
        return {}
    from trainer_core.tasks.schemas import TaskKind, TaskPhase

    newest: dict[str, str] = {}
    for record in ctx.tasks.store.list(kind=TaskKind.evaluate, limit=1000):
        if record.job_id and record.phase == TaskPhase.completed and record.job_id not in newest:
            newest[record.job_id] = _eval_text(record.result)
    return newest


def _minutes(seconds: Optional[float]) -> str:
    """Seconds as the status line writes them (``2m 05s``, ``1h 02m 03s``)."""
    return clock(seconds)


def run_status(run: RunRecord) -> str:
    """The run's state in one word (``store.status_word``, "early stopped" spelt with a space): its
    phase, except ``cancelled`` for a stopped run that was cancelled (nothing saved) — ``stopped``
    then always means stopped and saved."""
    return status_word(run).replace("_", " ")


def _dataset_text(request: dict[str, Any]) -> str:
    names = [Path(p).name for p in request.get("local_datasets") or []]
    if request.get("hf_dataset"):
        names.append(request["hf_dataset"])
    return ", ".join(names[:2]) + (f" +{len(names) - 2}" if len(names) > 2 else "")


def method_text(request: dict, kind: str = "") -> str:
    """The runs table's method cell: ``lora``, ``qlora`` or ``full``, with the preference method
    when there is one (``dpo · lora``), or the model kind of a run that does not train a chat model
    (``kind``: ``run_kind``'s, e.g. ``embedding · lora``)."""
    training = str(request.get("training_type", ""))
    method = request.get("training_method", "sft")
    if kind:
        return f"{kind} · {training}"
    return training if method == "sft" else f"{method} · {training}"


def run_kind(run: RunRecord) -> str:
    """The name of the model kind run ``run`` trains when that kind serves no chat (e.g.
    "embedding"), else "": as its request says (``kind_for_request``), else its run folder, else
    its base model's folder on this machine (a sentence-transformers folder embeds)."""
    request = run.request
    claimed = next((k for k in kinds() if k.claims_request(SimpleNamespace(**request))), None)
    if claimed is None:
        folders = [Path(f) for f in (run.output_dir, request.get("model_name")) if isinstance(f, str) and f]
        claimed = next((k for f in folders if f.is_dir() for k in kinds() if k.claims_folder(f)), None)
    return claimed.name if claimed is not None and claimed.serves != "chat" else ""


def _row(run: RunRecord, evaluation: str = "") -> list[Any]:
    request = run.request
    model = str(request.get("model_name", ""))
    return [
        run.job_id,
        run.name or "",
        datetime.fromtimestamp(run.created_at).strftime("%Y-%m-%d %H:%M:%S"),
        run_status(run),
        model.rsplit("/", 1)[-1],
        _dataset_text(request),
        method_text(request, run_kind(run)),
        f"{run.last_step} / {run.total_steps or '?'}",
        None if run.final_loss is None else round(run.final_loss, 4),
        None if run.tokens_per_second is None else round(run.tokens_per_second),
        _minutes(run.training_seconds),
        _minutes(run.wall_seconds),
        evaluation,
    ]


def runs_table(
    ctx: Context,
    name: Optional[str] = "",
    status: Optional[str] = ALL_STATUSES,
    dataset: Optional[str] = "",
    shown: Any = RUNS_PAGE,
) -> pd.DataFrame:
    """The newest ``shown`` remembered runs (``run_filters.shown_count``) that match the filters
    (``run_filters.list_filters``: name or job id contains ``name``, status word is ``status``
    unless "all", a dataset path or Hub id contains ``dataset``); ``gr.Error`` for an unknown
    status, an over-long filter or a bad count."""
    runs = ctx.runner.store.list_runs(limit=shown_count(shown), **list_filters(name, status, dataset))
    evaluations = _evaluations(ctx)
    return pd.DataFrame([_row(r, evaluations.get(r.job_id, "")) for r in runs], columns=RUN_COLUMNS)


def more_runs(ctx: Context, *listed: Any) -> pd.DataFrame:
    """*Show more*: ``runs_table`` of ``listed`` (the three filters, then the table as the page has
    it) with ``RUNS_PAGE`` more runs than that table (``run_filters.more_rows``)."""
    *filters, table = listed
    return runs_table(ctx, *filters, more_rows(table))


def _get(ctx: Context, job_id: Optional[str]) -> RunDetail:
    job_id = (job_id or "").strip()
    run = ctx.runner.store.get_run(job_id) if job_id else None
    if run is None:
        shown = job_id if len(job_id) <= 60 else job_id[:60] + "…"
        raise Refused(
            f"No run '{html.escape(shown)}': click a run in the table first."
            if job_id
            else "Click a run in the table first."
        )
    return run


def select_run(table: pd.DataFrame, evt: gr.SelectData) -> str:
    """The job id of the clicked row."""
    return str(table.iloc[evt.index[0]]["job_id"])


def view_key(ctx: Context, job_id: Optional[str]) -> str:
    """What the selected run's view shows, as one string (phase, step, checkpoints): the Runs tab
    polls it and redraws the run's panels when it changes, so a run selected while it trains shows
    its end (the weights to export, the buttons, the summary) without another click."""
    job_id = job_id.strip() if isinstance(job_id, str) else ""
    run = ctx.runner.store.get_run(job_id) if job_id and ctx.runner.store is not None else None
    if run is None:
        return job_id
    return f"{job_id}|{run.phase.value}|{run.last_step}|{run.last_checkpoint}|{run.best_checkpoint}"


def is_live(ctx: Context, job_id: Optional[str]) -> bool:
    """Whether run ``job_id`` is still live (loading or training): its view can still change."""
    job_id = job_id.strip() if isinstance(job_id, str) else ""
    run = ctx.runner.store.get_run(job_id) if job_id and ctx.runner.store is not None else None
    return run is not None and run.phase in LIVE_PHASES


def on_select(ctx: Context) -> Callable[[pd.DataFrame, gr.SelectData], str]:
    """``select_run`` with its ``gr.SelectData`` parameter visible to Gradio (which does not see
    it through ``functools.partial``)."""

    def handler(table: pd.DataFrame, evt: gr.SelectData) -> str:
        return select_run(table, evt)

    return handler


def _run_buttons(ctx: Context, run: Optional[RunDetail]) -> list[Any]:
    """Load settings / Resume / Chat / Delete, each enabled only where it acts on ``run``: Resume for
    a resumable run with a checkpoint while no job runs; Chat when it saved weights; Delete unless it
    is the training run."""
    if run is None:
        return [gr.update(interactive=False) for _ in range(4)]
    status = ctx.runner.status(with_history=False)
    live = status.is_training_running and status.job_id == run.job_id
    resumable = run.phase in RESUMABLE_PHASES and bool(run.last_checkpoint) and not status.is_training_running
    has_weights = run.last_checkpoint is not None or run.phase.value == "completed"
    return [
        gr.update(interactive=True),
        gr.update(interactive=resumable),
        gr.update(interactive=has_weights and not live),
        gr.update(interactive=not live),
    ]


def _label_lines(run: RunRecord) -> str:
    """The summary's first lines: the run's name (a level-3 heading) and its note (under a bold
    "Note:"), each shown as plain text (``literal_markdown``); "" when neither is set."""
    text = f"### {literal_markdown(run.name)}\n\n" if run.name else ""
    if run.note:
        text += f"**Note:**  \n{literal_markdown(run.note)}\n\n"
    return text


def _retrieval_line(events: list) -> str:
    """An embedding run's last held-out retrieval metrics (``compare.FINAL_SERIES``) as a summary
    line, "" for a run that logged none."""
    last = next((e for e in reversed(events) if any(getattr(e, n) is not None for n in FINAL_SERIES)), None)
    if last is None:
        return ""
    parts = [f"{name} {getattr(last, name):.4f}" for name in FINAL_SERIES if getattr(last, name) is not None]
    return f"\n\nHeld-out retrieval at step {last.step}: " + " · ".join(parts)


def show_run(ctx: Context, job_id: Optional[str]) -> tuple:
    """Summary, settings, charts (loss, learning rate, grad norm, and the rewards of a GRPO or
    preference run, or an embedding run's held-out retrieval metrics) and the four run buttons' states of run ``job_id`` (all blank and
    the buttons off when none is chosen). The summary (Markdown) starts with the run's name and
    note when set, escaped so they show as typed (``literal_markdown``)."""
    if not (job_id or "").strip():
        return (NO_RUN, None, None, None, None, gr.update(value=None, visible=False), *_run_buttons(ctx, None))
    run = _get(ctx, job_id.strip())
    points = chart_points_of(run.metrics)
    rewards = grpo_charts.rewards_figure(points)  # a GRPO or preference run's rewards, an embedder's retrieval
    summary = _label_lines(run) + (
        f"**{run.job_id}** · {run_status(run)} · step {run.last_step} / {run.total_steps or '?'} · "
        f"training {_minutes(run.training_seconds)} · wall {_minutes(run.wall_seconds)}"
        f"\n\nOutput: `{run.output_dir}`\n\nLast checkpoint: `{run.last_checkpoint or 'none'}`"
    )
    if run.best_checkpoint:
        loss = f" (eval loss {run.best_eval_loss:.4f})" if run.best_eval_loss is not None else ""
        summary += f"\n\n★ **Best checkpoint:** `{run.best_checkpoint}`{loss}: the final weights are this checkpoint's"
    elif run.best_eval_loss is not None:
        summary += f"\n\nBest eval loss: {run.best_eval_loss:.4f}"
    summary += _retrieval_line(run.metrics)
    if run.error:
        summary += f"\n\n**Error:** {run.error}"
    return (
        summary,
        run.request,
        charts.loss_figure(points),
        charts.learning_rate_figure(points),
        charts.grad_norm_figure(points),
        gr.update(value=rewards, visible=rewards is not None),
        *_run_buttons(ctx, run),
    )


def load_settings(ctx: Context, job_id: Optional[str]) -> list[Any]:
    """Values for [server paths, eval paths, *form widgets] from the run's stored settings (the
    token is never stored, so it stays empty); the page then refreshes the dataset preview."""
    values = form_values(_get(ctx, job_id).request)
    gr.Info(f"Loaded the settings of {job_id} into the Train tab.")
    return values


def form_for_resume(ctx: Context, job_id: Optional[str]) -> list[Any]:
    """Resume's other half: the form shows the resumed run's settings and data (as after a reload
    mid-run); every widget is left alone when the run cannot be resumed."""
    job_id = (job_id or "").strip()
    run = ctx.runner.store.get_run(job_id) if job_id and isinstance(job_id, str) else None
    status = ctx.runner.status(with_history=False)
    if run is None or run.phase not in RESUMABLE_PHASES or not run.last_checkpoint or status.is_training_running:
        return [gr.skip()] * (2 + len(FORM_FIELDS))
    return form_values(run.request)


def resume(ctx: Context, job_id: Optional[str], session: Optional[str] = None) -> Iterator[tuple]:
    """Continue a stopped, interrupted or failed run from its last complete checkpoint; streams
    (*monitor, train notice, runs notice, tabs) like Start, switching to the Train tab once it
    started. A refusal stays on the Runs tab, said beside the Resume button (and as a toast).
    ``session``: the tab (``watch``)."""
    action = "Not resumed"
    try:
        run = _get(ctx, job_id)
    except gr.Error as exc:
        yield (*refused(ctx, exc, action)[:-1], gr.skip(), notice_html(exc, action), gr.skip())
        return
    if run.phase not in RESUMABLE_PHASES or not run.last_checkpoint:
        message = (
            f"Run {run.job_id} is {run_status(run)} with no saved checkpoint; only stopped, interrupted or "
            "failed runs with a complete checkpoint can be resumed."
        )
        yield (*refused(ctx, message, action)[:-1], gr.skip(), notice_html(message, action), gr.skip())
        return
    request = TrainingStartRequest(**{**run.request, "resume_from_checkpoint": run.last_checkpoint})
    problem = begin(ctx, request)
    if problem is not None:
        yield (*refused(ctx, problem, action)[:-1], gr.skip(), notice_html(problem, action), gr.skip())
        return
    for index, update in enumerate(watch(ctx.runner, session)):
        first = index == 0
        yield (
            *update,
            NOTICE_CLEAR if first else gr.skip(),
            NOTICE_CLEAR if first else gr.skip(),
            gr.update(selected="train") if first else gr.skip(),
        )


def delete(ctx: Context, job_id: Optional[str]) -> tuple[pd.DataFrame, Any, str, str]:
    """Forget a run and delete the files it wrote (``write_folders.delete_run``: in its run folder
    and a folder it claimed beside it, such as its ``tensorboard_dir``): never a
    studio folder, another run's files or files put beside them; what is kept is said. Returns the
    table, the hidden confirmation row, and a blank run id (which clears the run's summary, charts
    and settings from the page) and notice."""
    run = _get(ctx, job_id)
    status = ctx.runner.status(with_history=False)
    if status.is_training_running and status.job_id == run.job_id:
        raise Refused("This run is training: stop or cancel it first.")
    task = ctx.tasks.current() if ctx.tasks is not None else None
    if task is not None and task.job_id == run.job_id:
        raise Refused(f"{task.kind.value} task {task.task_id} is working on this run: wait for it or cancel it first.")
    settings = ctx.settings
    result = delete_run(run, settings.allowed_roots, settings.protected_dirs, settings.runs_dir)
    ctx.runner.store.delete_run(run.job_id)
    if result.refused:
        gr.Warning(f"Removed run {run.job_id} from the history; no files were deleted: {result.refused}.")
    elif result.kept:
        gr.Warning(
            f"Deleted run {run.job_id} ({result.removed} files). Kept {len(result.kept)} files it did not "
            f"write in {run.output_dir}: {', '.join(result.kept[:5])}"
        )
    else:
        gr.Info(f"Deleted run {run.job_id} and its {result.removed} files.")
    return runs_table(ctx), gr.update(visible=False), "", ""


def download(ctx: Context, job_id: Optional[str]) -> tuple[Any, str]:
    """(the run's zip, runs notice): ``run.json`` with the final weights (``runs.bundle``), written
    to ``<temp>/studio-bundles/<job id>/`` for the browser to fetch (a new download replaces it, so
    repeated clicks do not fill the disk). A run without ``run.json`` (made by an older
    version) or whose folder lies outside the allowed folders is said in the notice."""
    import tempfile

    from trainer_core.paths import PathNotAllowed, confine
    from trainer_core.runs.bundle import BundleError, run_bundle

    action = "Not downloaded"
    try:
        run = _get(ctx, job_id)
        folder = confine(run.output_dir, ctx.settings.allowed_roots, "output_dir")
        archive = run_bundle(folder, Path(tempfile.gettempdir()) / "studio-bundles" / run.job_id)
    except (gr.Error, BundleError, PathNotAllowed, OSError) as exc:
        return gr.skip(), notice_html(exc, action)
    return gr.update(value=str(archive), visible=True), NOTICE_CLEAR


def chat_with(ctx: Context, engine: ChatEngine, job_id: Optional[str]) -> tuple[dict, Optional[str]]:
    """The Chat tab's model picker set to run ``job_id``'s final weights (or, when it saved none, its
    newest checkpoint), and the newest run as the tab has now seen it (``chat_handlers.model_listing``
    then keeps this choice); ``gr.Error`` when the run has nothing to talk to."""
    run = _get(ctx, job_id)
    choices = engine.choices()
    own = [c for c in choices if c.job_id == run.job_id]
    if not own:
        raise Refused(f"Run {run.job_id} has no saved weights to chat with (it saved no final weights or checkpoint).")
    pick = next((c for c in own if c.kind == "final"), own[0])
    return gr.update(choices=[(c.label, c.id) for c in choices], value=pick.id), newest_run(choices)
