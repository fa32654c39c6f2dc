"""The Runs tab's Evaluate panel: run the selected run (a checkpoint, or the base model) over
held-out rows in the background, then show loss, perplexity, ROUGE-L, BLEU and exact match (an
embedding model: nDCG@10, MRR@10, recall@1 / @10, Spearman) beside the base model's, a sortable prompt / reference / base / tuned table, and the JSONL to download."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Optional

import gradio as gr
import pandas as pd
from pydantic import ValidationError

from trainer_core.evaluation.report import TABLE_HEAD, score_table
from trainer_core.evaluation.schemas import EvaluateRequest, Scores
from trainer_core.refusals import explain
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRefused, TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from ui.form import number_widgets
from ui.tables import fit_table
from ui.task_progress import file_links, follow, refusal, run_choices, status_line
from ui.uploads import keep_upload, split_paths

FREE = dict(concurrency_limit=None)
FIELDS = EvaluateRequest.model_fields
UPLOAD_LABEL = "Held-out dataset (upload)"
TABLE_COLUMNS = [
    "prompt", "reference", "base_answer", "tuned_answer", "rouge_l_base", "rouge_l_tuned", "base_calls", "tuned_calls",
]  # fmt: skip
MAX_TABLE_ROWS = 500
CALL_COLUMNS = ("base_calls", "tuned_calls")  # rows with tools: the calls parsed from each answer


def scores_text(record: Optional[TaskRecord]) -> str:
    """Markdown table of the tuned (and base) scores of a finished evaluation, with its notes."""
    result = (record.result or {}) if record is not None else {}
    if not result.get("tuned"):
        return ""
    tuned, base = Scores(**result["tuned"]), Scores(**result["base"]) if result.get("base") else None
    lines = ["| " + " | ".join(cells) + " |" for cells in [TABLE_HEAD, *score_table(tuned, base)]]
    lines.insert(1, "|---" * len(TABLE_HEAD) + "|")
    notes = "".join(f"\n\n{note}" for note in result.get("notes", []))
    return (
        f"{result.get('rows_evaluated')} of {result.get('rows_available')} rows evaluated in "
        f"{result.get('seconds', 0):.0f} s\n\n" + "\n".join(lines) + notes
    )


def predictions_table(record: Optional[TaskRecord]) -> pd.DataFrame:
    """The first rows of the evaluation's predictions file, prompt / reference / base / tuned, the
    ROUGE-L scores rounded to 3 decimals, the calls parsed from each answer where rows have tools (an embedding model's: its rows with each model's rank or
    cosine, ``kinds.embedding.evaluation``)."""
    if record is None or not record.result or not record.output_dir:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    path = Path(record.output_dir) / record.result.get("predictions_file", "predictions.jsonl")
    rows: list[dict[str, Any]] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                rows.append(json.loads(line))
                if len(rows) >= MAX_TABLE_ROWS:
                    break
    except (OSError, ValueError):
        return pd.DataFrame(columns=TABLE_COLUMNS)
    frame = pd.DataFrame(rows)
    # a text model's answers; else the file's own columns (an embedding model's rows with their ranks)
    frame = frame[[c for c in TABLE_COLUMNS if c in frame.columns] or [c for c in frame.columns if c != "index"]]
    scores = [c for c in ("rouge_l_base", "rouge_l_tuned") if c in frame.columns]
    frame[scores] = frame[scores].round(3)  # 0.133, not 0.13333333333333333 (predictions.jsonl keeps all)
    calls = [c for c in CALL_COLUMNS if c in frame.columns]
    frame = frame.drop(columns=[c for c in calls if frame[c].isna().all()])  # no row with tools: no calls columns
    for column in (c for c in calls if c in frame.columns):
        frame[column] = frame[column].map(shown_calls)
    return frame


def shown_calls(calls: Optional[list[dict[str, Any]]]) -> str:
    """Parsed calls (``[{"name", "arguments"}]``) as ``name({...}); ...``; '' for a row without tools,
    "(none)" where the answer made no call."""
    if not isinstance(calls, list):
        return ""
    return "; ".join(f"{c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})" for c in calls) or "(none)"


def latest(tasks: TaskRunner, job_id: Optional[str]) -> tuple[str, pd.DataFrame, str]:
    """The run's newest evaluation: scores, table, download link."""
    job_id = (job_id or "").strip()
    records = tasks.list(job_id, TaskKind.evaluate) if job_id else []
    record = next((r for r in records if r.phase == TaskPhase.completed), None)
    return scores_text(record), predictions_table(record), file_links(record) if record else ""


def model_dropdown(tasks: TaskRunner, job_id: Optional[str]) -> dict:
    """``base`` and the selected run's weights; the run's final weights chosen."""
    choices = run_choices(tasks, job_id, with_base=True)
    return gr.update(choices=choices, value=choices[1][1] if len(choices) > 1 else choices[0][1])


def _files(settings: Settings, upload: Optional[str], paths_text: str) -> list[str]:
    kept = keep_upload(upload, settings, UPLOAD_LABEL)
    return ([kept] if kept else []) + split_paths(paths_text)


PATHS_LABEL = "...or held-out dataset paths on the server"
LABELS = {
    "datasets": "Held-out dataset (the upload or the paths box)",
    "max_rows": "Max rows",
    "max_new_tokens": "Max new tokens",
    "batch_size": "Batch size",
    "model": "Model to evaluate",
}


def _unset(name: str, value: Any) -> bool:
    """An empty box; for an optional field (default None, e.g. Max rows) also the 0 a browser sends
    for an emptied number box: the field's default applies."""
    return value in (None, "") or (value == 0 and FIELDS[name].default is None)


def on_screen(text: str) -> str:
    """A refusal with the request's field names replaced by the labels on screen: ``datasets: ...``
    and ``... held-out files in datasets``."""
    text = text.removeprefix("settings: ")
    for name, label in LABELS.items():
        text = re.sub(rf"(?<![\w/.-]){name}:", f"{label}:", text)
    return re.sub(r"\bin datasets\b(?![/.]\w)", "in the held-out dataset box", text)


def evaluate(
    tasks: TaskRunner,
    model_id: Optional[str],
    upload: Optional[str],
    paths_text: str,
    max_rows: Optional[float],
    max_new_tokens: Optional[float],
    batch_size: Optional[float],
    compare_base: bool,
) -> Iterator[tuple]:
    """Start the evaluation and follow it: (status, scores, table, link) on every change."""
    from trainer_core.evaluation.start import start_evaluation

    empty = ("", pd.DataFrame(columns=TABLE_COLUMNS), "")
    try:
        values = {"max_rows": max_rows, "max_new_tokens": max_new_tokens, "batch_size": batch_size}
        request = EvaluateRequest(
            model=model_id.strip() if isinstance(model_id, str) and model_id.strip() else "base",
            compare_base=bool(compare_base),
            datasets=_files(tasks.settings, upload, paths_text),
            **{k: int(v) for k, v in values.items() if not _unset(k, v)},
        )
        record = start_evaluation(tasks, request)
    except ValidationError as exc:
        yield (refusal(on_screen(explain(exc))), *empty)
        return
    except (TaskRefused, gr.Error) as exc:
        yield (refusal(on_screen(getattr(exc, "message", None) or str(exc))), *empty)
        return
    for current in follow(tasks, record.task_id):
        done = current.phase == TaskPhase.completed
        yield (
            status_line(current),
            scores_text(current) if done else "",
            predictions_table(current) if done else pd.DataFrame(columns=TABLE_COLUMNS),
            file_links(current) if done else "",
        )


def build(tasks: TaskRunner, selected: gr.Textbox, shown: Optional[gr.Textbox] = None) -> gr.Button:
    """The panel (inside the Runs tab), wired to ``selected`` (the chosen run's job id) and redrawn
    when ``shown`` changes (``run_handlers.view_key``: the run moved on, e.g. it finished).
    Returns its *Cancel task* button (``task_progress.wire_cancel_buttons`` keeps it current)."""
    with gr.Accordion("Evaluate", open=False, elem_id="evaluate-panel"):
        model = gr.Dropdown(
            label="Model to evaluate",
            choices=[],
            elem_id="eval-model",
            allow_custom_value=True,
            info=FIELDS["model"].description,
        )
        with gr.Row():
            upload = gr.File(
                label=UPLOAD_LABEL,
                file_types=[".json", ".jsonl", ".csv", ".parquet"],
                type="filepath",
                elem_id="evaluate-upload",
            )
            paths = gr.Textbox(label=PATHS_LABEL, info=FIELDS["datasets"].description)
        with gr.Row():
            numbers = number_widgets(EvaluateRequest, ("max_rows", "max_new_tokens", "batch_size"), prefix="eval-")
            compare = gr.Checkbox(
                label="Compare with the base model",
                value=FIELDS["compare_base"].default,
                info=FIELDS["compare_base"].description,
            )
        with gr.Row():
            eval_btn = gr.Button("Evaluate", variant="primary", elem_id="eval-start")
            cancel_btn = gr.Button("Cancel task", variant="stop", interactive=False, elem_id="eval-cancel")
        status = gr.Markdown(elem_id="eval-status")
        scores = gr.Markdown(elem_id="eval-scores")
        table = fit_table(pd.DataFrame(columns=TABLE_COLUMNS), "eval-table", 400)
        link = gr.Markdown(elem_id="eval-link")
    from ui.export_panel import cancel

    for trigger in (selected.change, *([shown.change] if shown is not None else [])):
        trigger(partial(model_dropdown, tasks), selected, model, api_name=False, **FREE)
        trigger(partial(latest, tasks), selected, [scores, table, link], api_name=False, **FREE)
    eval_btn.click(
        partial(evaluate, tasks),
        [model, upload, paths, *numbers.values(), compare],
        [status, scores, table, link],
        api_name="evaluate",
        show_progress="minimal",
        **FREE,
    )
    cancel_btn.click(partial(cancel, tasks), None, status, api_name=False, **FREE)
    cancel_btn.starts = [eval_btn]  # the button that starts a task (task_progress.wire_cancel_buttons)
    return cancel_btn
