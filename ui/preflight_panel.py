"""The Check button beside Start: the pre-flight check of the form as it is (``trainer_core.
preflight.check.run_preflight``: tokenizer only, no weights), shown as a report and a token-length
histogram. It never takes the job lock, so it runs while a job trains."""

from __future__ import annotations

import logging
from typing import Any, Optional

import gradio as gr
from gradio.components.plot import PlotData

from trainer_core.access.admission import REFUSALS, checked_for_preflight
from ui.form import FORM_FIELDS, build_request
from ui.handlers import Context, dataset_paths
from ui.preflight_view import histogram_figure, report_html
from ui.refusals import EVAL_UPLOAD_LABEL, notice_html

log = logging.getLogger(__name__)


def check(
    ctx: Context, upload: Optional[str], paths_text: str, eval_upload: Optional[str], eval_text: str, *values: Any
) -> tuple[Any, Any, Any, str]:
    """(report accordion, report HTML, histogram, notice) for the form's settings and data. A
    setting or path that cannot be used is said in the notice (with the field's label) instead,
    as Start would say it; nothing else changes then."""
    from trainer_core.data import import_data_stack

    try:
        train_files = dataset_paths(upload, paths_text, ctx.settings)
        eval_files = dataset_paths(eval_upload, eval_text, ctx.settings, EVAL_UPLOAD_LABEL)
        request = build_request(dict(zip(FORM_FIELDS, values)), train_files, eval_files)
        request = checked_for_preflight(request, ctx.settings)
        import_data_stack()
        from trainer_core.preflight.check import run_preflight

        report = run_preflight(request, ctx.settings, ctx.runner.store)
    except gr.Error as exc:
        return gr.skip(), gr.skip(), gr.skip(), notice_html(exc.message, "Not checked")
    except REFUSALS as exc:
        return gr.skip(), gr.skip(), gr.skip(), notice_html(str(exc), "Not checked")
    except Exception as exc:  # noqa: BLE001 - the page says what went wrong, never a traceback
        log.exception("pre-flight check failed")
        return (
            gr.skip(),
            gr.skip(),
            gr.skip(),
            notice_html(f"the check failed ({type(exc).__name__}: {exc})", "Not checked"),
        )
    figure = PlotData(type="plotly", plot=histogram_figure(report).to_json())
    return gr.Accordion(open=True, visible=True), report_html(report), figure, ""
