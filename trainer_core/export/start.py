"""Start an export or a Hub push as a background task (``TaskRunner``), refusing what cannot work
before a worker is spent on it. Used by the HTTP API and the Runs tab; the CLI runs the same export
code in its own process (``cli.export``).

Refusals are ``TaskRefused(message, status)``: 404 unknown model or task; 400 the base model (not
a run), an adapter export of a full fine-tune, GGUF without the converter or for an architecture it
does not convert, a push of an export that did not finish and pass; 409 while training or another
task runs (from ``TaskRunner.start``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from trainer_core.export.gguf_convert import gguf_problem, missing_message
from trainer_core.export.schemas import QUANTISED, ExportRequest, PushRequest
from trainer_core.llamacpp.build import missing_message as llama_cpp_missing
from trainer_core.model_kind import kind_for_folder
from trainer_core.models.hub import looks_like_path
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.serving.schemas import ModelChoice
from trainer_core.tasks.runner import TaskRefused, TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord

log = logging.getLogger(__name__)


def start_export(tasks: TaskRunner, request: ExportRequest) -> TaskRecord:
    """Start exporting ``request.model`` in ``request.format``; returns the running task's record.
    Raises TaskRefused (see the module docstring)."""
    from trainer_core.export.worker import run_export

    choice = tasks.resolve(request.model)
    settings = tasks.settings
    refusal = export_refusal(choice, request, settings.gguf_converter_dir, settings.models_dir, settings.llama_cpp_dir)
    if refusal:
        raise TaskRefused(refusal, 400, code="export_unavailable")
    context = {
        "converter_dir": str(settings.gguf_converter_dir),
        "llama_cpp_dir": str(settings.llama_cpp_dir),
        "run": run_info(tasks, choice),
    }
    body = request.model_dump()
    return tasks.start(TaskKind.export, choice, body, run_export, context=context, public_request=body)


def export_refusal(
    choice: ModelChoice,
    request: ExportRequest,
    converter_dir: Path,
    models_dir: Path,
    llama_cpp_dir: Optional[Path] = None,
) -> Optional[str]:
    """Why ``choice`` cannot be exported as ``request.format`` (None: it can, as far as cheap checks
    tell): a quantised GGUF type (``QUANTISED``) also needs llama.cpp built in ``llama_cpp_dir``."""
    if choice.kind == "base" or not choice.path:
        return (
            "the base model is not a run: export a run (its job id) or one of its checkpoints "
            "(JOB_ID/checkpoint-N); the base model is already available from its source"
        )
    if request.format == "adapter" and not choice.adapter:
        return f"{choice.id} is a full fine-tune: it has no adapter to export; choose merged or a gguf-* format"
    if request.format.startswith("gguf"):
        missing = missing_message(converter_dir)
        if missing:
            return missing
        quantised = [t for t in request.gguf_list() if t in QUANTISED]
        llama_missing = llama_cpp_missing(llama_cpp_dir) if llama_cpp_dir is not None else "llama.cpp is not set up"
        if quantised and llama_missing:
            return f"GGUF {', '.join(quantised)}: {llama_missing}"
        config = model_config(choice, models_dir)
        if config is not None:
            return gguf_problem(config, converter_dir, kind_for_folder(Path(choice.path)))
    return None


def model_config(choice: ModelChoice, models_dir: Path) -> Optional[dict[str, Any]]:
    """The config.json of the model a choice's weights are (a full fine-tune's folder, or the
    adapter's base: a local folder, the Hub cache or the materialized default), without
    downloading anything; None when it is not at hand (the worker checks again)."""
    if not choice.adapter:
        path: Optional[Path] = Path(choice.path) / "config.json"
    elif looks_like_path(choice.base_model):
        path = Path(choice.base_model).expanduser() / "config.json"
    else:
        path = _cached_config(choice.base_model, models_dir)
    try:
        value = json.loads(path.read_text(encoding="utf-8")) if path is not None else None
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _cached_config(repo_id: str, models_dir: Path) -> Optional[Path]:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:
        found = None
    if isinstance(found, str):
        return Path(found)
    if repo_id == DEFAULT_MODEL:
        return Path(models_dir) / DEFAULT_MODEL.split("/")[-1] / "config.json"
    return None


def run_info(tasks: TaskRunner, choice: ModelChoice) -> Optional[dict[str, Any]]:
    """The run history's request and logged metrics of the choice's run, for the model card (None
    when the run is not in the history: the worker then reads the run folder's files)."""
    run = tasks.run_record(choice.job_id) if choice.job_id else None
    if run is None:
        return None
    return {"request": run.request, "metrics": [m.model_dump(mode="json") for m in run.metrics]}


def start_push(tasks: TaskRunner, request: PushRequest) -> TaskRecord:
    """Push the files of export task ``request.task_id`` to the Hub repo ``request.repo_id``.
    The token goes to the worker only; the stored request has none. Raises TaskRefused."""
    from trainer_core.export.hub_push import repo_id_problem, run_push

    record = tasks.get(request.task_id)
    if record is None or record.kind != TaskKind.export:
        raise TaskRefused(
            f"task {request.task_id!r}: no such export; export the run first",
            404,
            code="unknown_export",
            fields=("task_id",),
        )
    if record.phase != TaskPhase.completed or not (record.result or {}).get("passed", False):
        state = "did not pass its check" if record.phase == TaskPhase.failed and record.result else record.phase.value
        raise TaskRefused(
            f"export {record.task_id} {state}: only a finished export that passed its check is pushed",
            400,
            code="export_not_passed",
            fields=("task_id",),
        )
    if not record.output_dir or not Path(record.output_dir).is_dir():
        raise TaskRefused(
            f"export {record.task_id}: its files were deleted; export the run again", 400, code="export_deleted"
        )
    if problem := repo_id_problem(request.repo_id):
        raise TaskRefused(f"repo_id: {problem}", 400, code="invalid_setting", fields=("repo_id",))
    choice = tasks.resolve(record.model)
    public = request.model_dump(mode="json", exclude={"token"})
    private = {**public, "token": request.token.get_secret_value() if request.token is not None else None}
    context = {"export": record.model_dump(mode="json")}
    return tasks.start(TaskKind.push, choice, private, run_push, context=context, public_request=public)
