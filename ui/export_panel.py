"""The Runs tab's Export panel: export the selected run (or one of its checkpoints) as an adapter
zip, a merged model or a GGUF file, in the background with progress; the run's exports listed with
size, check result and download links; push one to the Hugging Face Hub."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial
from typing import Any, Optional

import gradio as gr
import pandas as pd
from pydantic import SecretStr, ValidationError

from trainer_core.export import gguf_convert
from trainer_core.export.schemas import EXPORT_FORMATS, GGUF_TYPES, QUANTISED, ExportRequest, PushRequest
from trainer_core.llamacpp.build import missing_message as llama_cpp_missing
from trainer_core.refusals import explain
from trainer_core.tasks.runner import TaskRefused, TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from ui.tables import fit_table
from ui.task_progress import file_links, follow, refusal, run_choices, size_text, status_line

FREE = dict(concurrency_limit=None)  # the task runner admits one task at a time itself
EXPORT_COLUMNS = ["task", "created", "weights", "format", "dtype", "status", "size", "check"]
WEIGHTS_LABEL = "Weights to export"
FIELDS = ExportRequest.model_fields
PUSH = PushRequest.model_fields


def _row(record: TaskRecord) -> list[Any]:
    result = record.result or {}
    check = (result.get("check") or {}).get("summary") or (record.error or "")
    return [
        record.task_id,
        datetime.fromtimestamp(record.created_at).strftime("%Y-%m-%d %H:%M"),
        record.model,
        record.request.get("format", ""),
        record.request.get("dtype", "") if record.request.get("format") == "merged" else "",
        record.phase.value if record.phase != TaskPhase.failed or not result else "check failed",
        size_text(result.get("size_bytes", 0)) if result else "",
        check,
    ]


def exports_of(tasks: TaskRunner, job_id: Optional[str]) -> tuple[pd.DataFrame, str]:
    """The run's exports (newest first) and download links for those that finished."""
    job_id = job_id.strip() if isinstance(job_id, str) else ""  # a raw call may send anything
    records = tasks.list(job_id, TaskKind.export) if job_id else []
    links = [_links(r) for r in records if r.result]
    return pd.DataFrame([_row(r) for r in records], columns=EXPORT_COLUMNS), "\n".join(links)


def _links(record: TaskRecord) -> str:
    """A finished export's download links; for a GGUF export also its folder and, per file, its
    header type, size and checks (llama.cpp's, and transformers' read-back where it ran)."""
    line = f"- `{record.task_id}` ({record.request.get('format')}): {file_links(record)}"
    gguf = (record.result or {}).get("gguf") or []
    if not gguf:
        return line
    modelfiles = any(name.endswith(".Modelfile") for name in record.file_names())  # none for an embedder
    keep = " (keep each `.gguf` beside its `.Modelfile`)" if modelfiles else ""
    lines = [line, f"  - folder: `{record.output_dir}`{keep}"]
    for entry in gguf:
        words = []
        if check := entry.get("check"):
            verdict = "passed" if check.get("passed") else "FAILED"
            words.append(f"{check.get('checked_by') or 'check'} {verdict}: {check.get('summary', '')}")
        if second := entry.get("second_opinion"):  # transformers' read-back: shown, never what fails the file
            verdict = "agrees" if second.get("passed") else "differs"
            words.append(f"second opinion ({second.get('checked_by')}) {verdict}: {second.get('summary', '')}")
        words = "; ".join(words)
        lines.append(
            f"  - `{entry.get('name')}`: {entry.get('file_type') or entry.get('type')}, "
            f"{size_text(entry.get('size_bytes') or 0)}; {words or 'not checked'}"
        )
    return "\n".join(lines)


def weights_dropdown(tasks: TaskRunner, job_id: Optional[str], current: Optional[str] = None) -> dict:
    """The selected run's final weights and checkpoints; ``current`` stays chosen while it is one."""
    choices = run_choices(tasks, job_id)
    ids = [value for _, value in choices]
    return gr.update(choices=choices, value=current if current in ids else (ids[0] if ids else None))


def format_choices(converter_missing: Optional[str], llama_cpp_missing: Optional[str]) -> list[tuple[str, str]]:
    """The Format radio's (label, value) pairs: a GGUF format that cannot be made here (no converter;
    no llama.cpp for the quantised types) says what it needs in its label; choosing it anyway gets
    the refusal with the command that installs it."""
    choices = []
    for value in EXPORT_FORMATS:
        gguf_type = value.removeprefix("gguf-") if value.startswith("gguf-") else None
        needs = None
        if gguf_type and converter_missing:
            needs = "needs the GGUF converter: bash scripts/setup.sh"
        elif gguf_type in QUANTISED and llama_cpp_missing:
            needs = "needs llama.cpp: bash scripts/setup.sh"
        choices.append((f"{value} ({needs})" if needs else value, value))
    return choices


GGUF_TYPES_LABEL = "More GGUF formats"
LABELS = {"settings": "", "gguf_types": GGUF_TYPES_LABEL, "format": "Format", "dtype": "Merged dtype"}


def on_screen(text: str) -> str:
    """A refusal with the request's field names replaced by the labels on screen."""
    for name, label in LABELS.items():
        text = text.replace(f"{name}: ", f"{label}: " if label else "").replace(f"{name}.", f"{label}.")
    return text


def gguf_type_choices(llama_cpp_missing: Optional[str]) -> list[tuple[str, str]]:
    """The "More GGUF formats" boxes: a quantised type says it needs llama.cpp when it is not built."""
    return [(f"{t} (needs llama.cpp)" if t in QUANTISED and llama_cpp_missing else t, t) for t in GGUF_TYPES]


def export(
    tasks: TaskRunner,
    job_id: Optional[str],
    model_id: Optional[str],
    fmt: str,
    dtype: str,
    gguf_types: Optional[list[str]] = None,
) -> Iterator[tuple]:
    """Start the export and follow it: (status, exports table, links) on every change."""
    from trainer_core.export.start import start_export

    table, links = exports_of(tasks, job_id)
    if not isinstance(model_id, str) or not model_id.strip():  # a raw call may send anything
        yield refusal(f"{WEIGHTS_LABEL}: click a run with saved weights in the table first."), table, links
        return
    try:
        more = gguf_types if gguf_types is not None else []
        if isinstance(more, list):  # ticked boxes: the format's own type, and all for a non-GGUF format, are moot
            more = [t for t in more if str(fmt).startswith("gguf-") and t != str(fmt).removeprefix("gguf-")]
        record = start_export(tasks, ExportRequest(model=model_id, format=fmt, dtype=dtype, gguf_types=more))
    except ValidationError as exc:
        yield refusal(on_screen(explain(exc))), table, links
        return
    except TaskRefused as exc:
        yield refusal(str(exc)), table, links
        return
    for current in follow(tasks, record.task_id):
        yield (status_line(current), *exports_of(tasks, job_id))


def cancel(tasks: TaskRunner) -> str:
    """Cancel the running export, evaluation or push."""
    current = tasks.current()
    if current is None or not tasks.cancel(current.task_id):
        return "No export, evaluation or push is running."
    return f"Cancelling {current.task_id}…"


def push(
    tasks: TaskRunner, job_id: Optional[str], task_id: str, repo_id: str, private: bool, token: str
) -> Iterator[str]:
    """Push an export to the Hub and follow it; the token is passed on for this push only."""
    from trainer_core.export.start import start_push

    task_id = (task_id or "").strip()
    if not task_id:
        passed = [
            r
            for r in (tasks.list((job_id or "").strip(), TaskKind.export) if (job_id or "").strip() else [])
            if r.phase == TaskPhase.completed
        ]
        if not passed:
            yield refusal("Export to push: export this run first (a finished export whose check passed).")
            return
        task_id = passed[0].task_id
    try:
        body = PushRequest(
            task_id=task_id,
            repo_id=(repo_id or "").strip(),
            private=bool(private),
            token=SecretStr(token) if (token or "").strip() else None,
        )
        record = start_push(tasks, body)
    except ValidationError as exc:
        yield refusal(explain(exc))
        return
    except TaskRefused as exc:
        yield refusal(str(exc))
        return
    for current in follow(tasks, record.task_id):
        text = status_line(current)
        if current.phase == TaskPhase.completed and current.result:
            text += f"\n\nPushed to [{current.result.get('url')}]({current.result.get('url')})"
        yield text


def build(tasks: TaskRunner, selected: gr.Textbox, shown: Optional[gr.Textbox] = None) -> gr.Button:
    """The panel (inside the Runs tab), wired to ``selected`` (the chosen run's job id) and redrawn
    when ``shown`` changes (``run_handlers.view_key``: the run moved on, e.g. it finished).
    Returns its *Cancel task* button (``task_progress.wire_cancel_buttons`` keeps it current)."""
    with gr.Accordion("Export", open=False, elem_id="export-panel"):
        with gr.Row():
            weights = gr.Dropdown(
                label=WEIGHTS_LABEL,
                choices=[],
                scale=3,
                elem_id="export-weights",
                allow_custom_value=True,
                info="The run's final weights or one of its checkpoints.",
            )
            fmt = gr.Radio(
                label="Format",
                choices=format_choices(
                    gguf_convert.missing_message(tasks.settings.gguf_converter_dir),
                    llama_cpp_missing(tasks.settings.llama_cpp_dir),
                ),
                value=FIELDS["format"].default,
                scale=3,
                info=FIELDS["format"].description,
                elem_id="export-format",
            )
            dtype = gr.Dropdown(
                label="Merged dtype",
                choices=["float16", "bfloat16", "float32"],
                scale=1,
                value=FIELDS["dtype"].default,
                info=FIELDS["dtype"].description,
            )
        gguf_types = gr.CheckboxGroup(
            label=GGUF_TYPES_LABEL,
            choices=gguf_type_choices(llama_cpp_missing(tasks.settings.llama_cpp_dir)),
            value=[],
            info=FIELDS["gguf_types"].description,
            elem_id="export-gguf-types",
        )
        with gr.Row():
            export_btn = gr.Button("Export", variant="primary", elem_id="export-start")
            cancel_btn = gr.Button("Cancel task", variant="stop", elem_id="task-cancel", interactive=False)
        status = gr.Markdown(
            "Exports run in the background and are checked against the run's own answers before they are called done.",
            elem_id="export-status",
        )
        table = fit_table(pd.DataFrame(columns=EXPORT_COLUMNS), "export-table", 240)
        links = gr.Markdown(elem_id="export-links")
        with gr.Accordion("Push to the Hugging Face Hub", open=False):
            with gr.Row():
                task_id = gr.Textbox(
                    label="Export to push",
                    placeholder="empty: the newest passed export of this run",
                    info=PUSH["task_id"].description,
                    scale=2,
                )
                repo = gr.Textbox(
                    label="Hub repository", placeholder="your-name/my-model", info=PUSH["repo_id"].description, scale=2
                )
            with gr.Row():
                private = gr.Checkbox(label="Private", value=PUSH["private"].default, info=PUSH["private"].description)
                token = gr.Textbox(label="Hub token", type="password", info=PUSH["token"].description)
                push_btn = gr.Button("Push")
            push_status = gr.Markdown()
    for trigger in (selected.change, *([shown.change] if shown is not None else [])):
        trigger(partial(weights_dropdown, tasks), [selected, weights], weights, api_name=False, **FREE)
        trigger(partial(exports_of, tasks), selected, [table, links], api_name=False, **FREE)
    export_btn.click(
        partial(export, tasks),
        [selected, weights, fmt, dtype, gguf_types],
        [status, table, links],
        api_name="export",
        show_progress="minimal",
        **FREE,
    )
    cancel_btn.click(partial(cancel, tasks), None, status, api_name="task_cancel", **FREE)
    cancel_btn.starts = [export_btn, push_btn]  # the buttons that start a task (task_progress.wire_cancel_buttons)
    push_btn.click(
        partial(push, tasks),
        [selected, task_id, repo, private, token],
        push_status,
        api_name="push",
        show_progress="minimal",
        **FREE,
    )
    return cancel_btn
