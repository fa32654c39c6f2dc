"""The Check button beside Start: the pre-flight check of the form as it is (``trainer_core.
preflight.check.run_preflight``: tokenizer only, no weights, in the check's worker process:
``admission.check_worker``), shown as a report and a token-length histogram. It never takes the job
lock, so it runs while a job trains."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, Optional

import gradio as gr
from gradio.components.plot import PlotData

from trainer_core.admission.admit import checked_for_preflight
from trainer_core.admission.full_pass import full_pass
from trainer_core.refusals import Refusal
from ui import audio_panel, embedding_panel
from ui.context import Context, dataset_paths
from ui.form import FORM_FIELDS, build_request
from ui.preflight_view import histogram_figure, report_html
from ui.refusals import notice_html
from ui.uploads import EVAL_UPLOAD_LABEL

log = logging.getLogger(__name__)
TITLE = "Pre-flight check"
POLL_S = 1.0  # how often the page asks how the exact check is going


def _report(
    ctx: Context,
    upload: Optional[str],
    paths_text: str,
    eval_upload: Optional[str],
    eval_text: str,
    *values: Any,
    follow: bool = True,
) -> Any:
    """The pre-flight report of the form's settings and data, or the notice HTML (a str) that says
    why it could not be made: a setting or path that cannot be used (with the field's label, as
    Start would say it) or a failed check. The check runs in its own worker process
    (``admission.check_worker``); large training files are answered from a sample, with the exact
    check following in the background when ``follow`` (``admission.full_pass``)."""
    try:
        train_files = dataset_paths(upload, paths_text, ctx.settings)
        eval_files = dataset_paths(eval_upload, eval_text, ctx.settings, EVAL_UPLOAD_LABEL)
        form = audio_panel.applied(embedding_panel.applied(dict(zip(FORM_FIELDS, values)), ctx.settings), ctx.settings)
        request = build_request(form, train_files, eval_files)
        request = checked_for_preflight(request, ctx.settings, ctx.runner.store)
        from trainer_core.admission.full_pass import first_report

        return first_report(request, ctx.settings, ctx.runner.store, follow)
    except (gr.Error, Refusal) as exc:
        return notice_html(exc, "Not checked")
    except Exception as exc:  # noqa: BLE001 - the page says what went wrong, never a traceback
        log.exception("pre-flight check failed")
        return notice_html(f"the check failed ({type(exc).__name__}: {exc})", "Not checked")


def check(ctx: Context, *inputs: Any) -> Iterator[tuple[Any, Any, Any, str]]:
    """(report accordion, report HTML, histogram, notice) for the form's settings and data
    (``inputs``: upload, paths, evaluation upload, evaluation paths, then the form's values). When
    the check cannot run, only the notice changes (``_report``). An estimate from a sample comes
    first; its exact check's progress every POLL_S seconds, then the exact report in its place."""
    report = _report(ctx, *inputs)
    if isinstance(report, str):
        yield gr.skip(), gr.skip(), gr.skip(), report
        return
    yield gr.update(open=True, visible=True, label=TITLE), report_html(report), _figure(report), ""
    pass_id = report.estimate.full_pass_id if report.estimate is not None else None
    while pass_id is not None:
        time.sleep(POLL_S)
        state = full_pass(pass_id)
        if state is None:
            return
        if state.state == "done" and state.report is not None:
            yield gr.skip(), report_html(state.report), _figure(state.report), ""
            return
        yield gr.skip(), report_html(report, state), gr.skip(), ""
        if state.state == "ended":
            return


def _figure(report: Any) -> PlotData:
    return PlotData(type="plotly", plot=histogram_figure(report).to_json())


def recheck_at_start(ctx: Context, *inputs: Any) -> tuple[Any, Any, Any]:
    """(report accordion, report HTML, histogram) of the settings Start was pressed with, so the
    folded report never describes an earlier Check's settings (e.g. before *Max steps* was
    changed). It stays folded; its title says what it found ("Pre-flight check of this run: 1
    warning"). Nothing changes when the check cannot run (Start has said why)."""
    report = _report(ctx, *inputs, follow=False)
    if isinstance(report, str):
        return gr.skip(), gr.skip(), gr.skip()
    errors, warnings = len(report.errors), len(report.warnings)
    found = [f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in (("error", errors), ("warning", warnings)) if n]
    title = f"{TITLE} of this run: {' and '.join(found) or 'no problems'}"
    figure = PlotData(type="plotly", plot=histogram_figure(report).to_json())
    return gr.update(open=False, visible=True, label=title), report_html(report), figure
