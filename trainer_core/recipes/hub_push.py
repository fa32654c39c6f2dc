"""Push a recipe's result folder to the Hugging Face Hub as a dataset repo: ``start_dataset_push``
(a ``push`` task, as a model push is) and ``push_result`` (the work; the CLI calls it too). One
commit of the folder's files (``data.jsonl``, the data card as ``README.md``, ``recipe.yaml``,
``report.json``, ``rows.jsonl``, ``dropped.jsonl``), through ``export.hub_push.commit_files``: the
same token handling (used for this push only, never stored, logged or returned; errors redacted),
the same refusals (no token, the Hub unreachable, a repo the token may not write)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pydantic import SecretStr

from trainer_core.export.hub_push import HubPushError, commit_files, redact, repo_id_problem
from trainer_core.recipes.output import RESULT_FILES
from trainer_core.serving.schemas import ModelChoice
from trainer_core.tasks.runner import TaskRefused, TaskRunner
from trainer_core.tasks.schemas import TaskEvent, TaskKind, TaskRecord


def dataset_operations(folder: Path) -> list[Any]:
    """The commit's file additions: each of ``output.RESULT_FILES`` the folder holds."""
    from huggingface_hub import CommitOperationAdd

    return [CommitOperationAdd(name, str(folder / name)) for name in RESULT_FILES if (folder / name).is_file()]


def push_result(request: dict[str, Any], folder: Path, say: Any = lambda message: None) -> dict[str, Any]:
    """Create the dataset repo ``request["repo_id"]`` and commit the folder's files; returns
    ``{repo_id, url, private, files}``. Raises HubPushError."""
    ops: list[Any] = []

    def made() -> list[Any]:
        ops.extend(dataset_operations(folder))
        return ops

    url, private = commit_files(request, made, f"Dataset {folder.name} from Finetune Studio", "dataset", say)
    return {"repo_id": request["repo_id"], "url": url, "private": private, "files": [op.path_in_repo for op in ops]}


def run_dataset_push(request: dict[str, Any], context: dict[str, Any], events: Any, stop: Any) -> None:
    """Process entry point. Never raises; one ``result`` or ``error`` event."""
    from trainer_core.process.parent import exit_with_parent

    exit_with_parent()

    def say(message: str) -> None:
        events.put((TaskEvent.PROGRESS, {"fraction": 0.1, "message": message}))

    try:
        result = push_result(request, Path(context["folder"]), say)
    except HubPushError as exc:
        events.put((TaskEvent.ERROR, {"message": str(exc), "kind": "input"}))
        return
    except BaseException as exc:  # noqa: BLE001 - the process boundary; the token is redacted
        message = redact(f"the push failed: {type(exc).__name__}: {exc}", request.get("token"))
        events.put((TaskEvent.ERROR, {"message": message, "kind": "internal"}))
        return
    events.put((TaskEvent.RESULT, result))


def start_dataset_push(
    tasks: TaskRunner, result: str, repo_id: str, token: Optional[SecretStr] = None, private: bool = True
) -> TaskRecord:
    """Push the result folder ``result`` (a recipe task id or the folder's name) to the dataset repo
    ``repo_id``. The token goes to the worker only; the stored request has none. Raises TaskRefused
    (400 a bad repo id or an unfinished folder, 404 no such folder, 409 busy)."""
    from trainer_core.recipes.task import named_folder

    folder = named_folder(tasks, result, "result")
    if not (folder / "report.json").is_file():
        raise TaskRefused(
            f"result: {folder.name} was not finished (no report); resume it, then push",
            400,
            code="result_unfinished",
            fields=("result",),
        )
    if problem := repo_id_problem(repo_id):
        raise TaskRefused(f"repo_id: {problem}", 400, code="invalid_setting", fields=("repo_id",))
    public = {"result": folder.name, "repo_id": repo_id, "private": private, "repo_type": "dataset"}
    private_request = {**public, "token": token.get_secret_value() if token is not None else None}
    choice = ModelChoice(id=folder.name, label=f"dataset {folder.name}", kind="base", base_model=folder.name)
    return tasks.start(
        TaskKind.push,
        choice,
        private_request,
        run_dataset_push,
        context={"folder": str(folder)},
        public_request=public,
    )
