"""Export, evaluate and push to the Hub over HTTP (``/api/train/export`` ...), with the tasks' status,
cancel and file downloads. Thin routes over the shared ``TaskRunner``; every refusal is a 4xx whose
message says what to do (409 while training or another task runs, 404 unknown run or task, 400 a
model or file that cannot be used). Downloads take the API token or a logged-in page session, so
the Runs tab's links work in the browser; only files a finished task listed are served."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, StreamingResponse
from pydantic import BaseModel

from api.auth import require_docs_access, require_token
from api.zip_stream import stream_zip
from trainer_core.evaluation.schemas import EvaluateRequest
from trainer_core.export.schemas import ExportRequest, PushRequest
from trainer_core.paths import PathNotAllowed, confine, is_within
from trainer_core.refusals import Refusal
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskRecord

router = APIRouter(prefix="/api/train", tags=["export and evaluate"], dependencies=[Depends(require_token)])
files_router = APIRouter(prefix="/api/train", tags=["export and evaluate"], dependencies=[Depends(require_docs_access)])
REFUSED = {
    400: {"description": "A model or file that cannot be used"},
    404: {"description": "Unknown run or task"},
    409: {"description": "A training job or another task is running"},
}


class CancelResponse(BaseModel):
    """``idle`` when no such task was running."""

    status: Literal["idle", "cancelling"]
    message: str


def _tasks(request: Request) -> TaskRunner:
    return request.app.state.tasks


@router.post("/export", response_model=TaskRecord, responses=REFUSED)
def export(body: ExportRequest, tasks: TaskRunner = Depends(_tasks)) -> TaskRecord:
    """Start exporting a run or checkpoint (adapter zip, merged safetensors, GGUF f16 / q8_0); the
    answer is the task (``running``); follow it with ``GET /api/train/tasks/{task_id}``. The
    result lists the files, their sizes and the check against the adapter model."""
    from trainer_core.export.start import start_export

    return start_export(tasks, body)


@router.post("/evaluate", response_model=TaskRecord, responses=REFUSED)
def evaluate(body: EvaluateRequest, tasks: TaskRunner = Depends(_tasks)) -> TaskRecord:
    """Start evaluating a run, checkpoint or the base model on held-out rows (loss, perplexity,
    ROUGE-L, BLEU, exact match; predictions as JSONL)."""
    from trainer_core.evaluation.start import start_evaluation

    return start_evaluation(tasks, body)


@router.post("/push", response_model=TaskRecord, responses=REFUSED)
def push(body: PushRequest, tasks: TaskRunner = Depends(_tasks)) -> TaskRecord:
    """Push a finished, checked export to the Hugging Face Hub (private by default). The token is
    used for this push only and never stored, logged or returned."""
    from trainer_core.export.start import start_push

    return start_push(tasks, body)


@router.get("/tasks", response_model=list[TaskRecord])
def tasks_list(
    job_id: Optional[str] = None, kind: Optional[TaskKind] = None, tasks: TaskRunner = Depends(_tasks)
) -> list[TaskRecord]:
    """Tasks, newest first (only run ``job_id``'s / only ``kind`` when given: ``recipe`` lists the
    recipe runs)."""
    return tasks.list(job_id, kind)


@router.get("/tasks/{task_id}", response_model=TaskRecord, responses={404: {"description": "Unknown task"}})
def task(task_id: str, tasks: TaskRunner = Depends(_tasks)) -> TaskRecord:
    """One task: phase, progress (0..1), message, result or error."""
    found = tasks.get(task_id)
    if found is None:
        raise Refusal(f"no task {task_id}", fields=("task_id",), code="unknown_task", status=404)
    return found


@router.delete("/tasks/{task_id}", response_model=CancelResponse)
def cancel(task_id: str, tasks: TaskRunner = Depends(_tasks)) -> CancelResponse:
    """Cancel the running task: it ends ``cancelled`` within about two seconds and keeps no files; a
    recipe run (``POST /api/recipes/run``) stops instead: the requests in flight finish and what was
    made is written (its result says ``stopped``), resumable."""
    if not tasks.cancel(task_id):
        return CancelResponse(status="idle", message=f"task {task_id} is not running")
    return CancelResponse(status="cancelling", message=f"cancelling {task_id}")


def task_file(tasks: TaskRunner, task_id: str, name: str) -> Path:
    """The file ``name`` of a finished task, if the task listed it and it lies in the task's folder
    inside the allowed folders. Raises a 404 refusal otherwise (never saying more)."""
    record = tasks.get(task_id)
    missing = Refusal(f"task {task_id} has no file {name!r}", fields=("name",), code="unknown_file", status=404)
    if record is None or name not in record.file_names():
        raise missing
    try:
        folder = confine(record.output_dir, tasks.settings.allowed_roots, "task folder")
        path = confine(folder / name, tasks.settings.allowed_roots, "file")
    except PathNotAllowed:
        raise missing from None
    if not is_within(path, folder) or not path.is_file():
        raise missing
    return path


@files_router.get(
    "/tasks/{task_id}/files/{name:path}", response_class=FileResponse, responses={404: {"description": "No such file"}}
)
def download(task_id: str, name: str, tasks: TaskRunner = Depends(_tasks)) -> FileResponse:
    """Download one file a finished export, evaluation or recipe run wrote (its name as listed in the result)."""
    path = task_file(tasks, task_id, name)
    return FileResponse(path, filename=path.name)


@files_router.get(
    "/tasks/{task_id}/zip",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/zip": {}}}, 404: {"description": "No such task or no files"}},
)
def download_zip(task_id: str, tasks: TaskRunner = Depends(_tasks)) -> StreamingResponse:
    """Every file a finished export or evaluation listed, in one ZIP (``<task_id>.zip``, streamed;
    each file passes the same checks as a single download)."""
    record = tasks.get(task_id)
    files = [(name, task_file(tasks, task_id, name)) for name in (record.file_names() if record else [])]
    if not files:
        raise Refusal(f"task {task_id} has no files to download", code="unknown_file", status=404)
    disposition = f'attachment; filename="{task_id}.zip"'
    return StreamingResponse(
        stream_zip(files), media_type="application/zip", headers={"Content-Disposition": disposition}
    )
