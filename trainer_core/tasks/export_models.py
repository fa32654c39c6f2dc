"""What exports wrote, as things to talk to: GGUF files (run by llama.cpp) and merged models.

Ids: ``EXPORT_TASK_ID/TYPE`` (e.g. ``export-20261205-101500-1a2b3c/q4_k_m``) for each GGUF file of
an export task, and the bare ``EXPORT_TASK_ID`` for the export's first file (its format's type) or,
for a merged export, its folder (a whole model: ``config.json`` + ``model*.safetensors``, loaded as
a full fine-tune's final weights are; its base model, for Base vs tuned, is the run's).
Listed: exports that finished with a result (``completed``, or ``failed`` when the check did not
pass: the files are kept and the label says so), whose files still exist, whose task folder lies in
the allowed folders (``paths.confine``), and, for GGUF, whose name is a plain ``.gguf`` file name in
it. No GGUF file is listed, and such an id is refused naming the setup command, while llama.cpp is
not built here (``llamacpp.build.missing_message``); merged models need no llama.cpp. An embedding
run's GGUF files are not listed (llama.cpp's ``llama-embedding`` / ``llama-server --embedding`` serve
them; this engine chats with GGUF files); its merged folder is, serving embeddings.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from trainer_core.llamacpp.build import missing_message
from trainer_core.model_kind import kind_for_folder
from trainer_core.paths import PathNotAllowed, confine
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.runs.store import RunStore
from trainer_core.serving.choices import has_weights
from trainer_core.serving.errors import ChatInputError, UnknownModel
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import Settings
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from trainer_core.tasks.store import TaskStore

log = logging.getLogger(__name__)
EXPORT_PREFIX = f"{TaskKind.export.value}-"  # task ids: export-YYYYmmdd-HHMMSS-hex (tasks.runner)


def is_export_id(model_id: str) -> bool:
    """True when ``model_id`` names an export (job ids start with ``job_``)."""
    return (model_id or "").startswith(EXPORT_PREFIX)


def _check_words(entry: dict, phase: TaskPhase) -> str:
    check = entry.get("check") or {}
    if phase == TaskPhase.failed or check.get("passed") is False:
        return "check did not pass"
    return "check passed" if check else "not checked"


def _folder(task: TaskRecord, settings: Settings) -> Path:
    """The export's folder, confined to the allowed folders; ChatInputError otherwise."""
    try:
        return confine(task.output_dir, settings.allowed_roots, "export folder")
    except PathNotAllowed as exc:
        raise ChatInputError(f"export {task.task_id}: {exc}") from None


def _request(task: TaskRecord, runs: Optional[RunStore]) -> dict:
    """The request of the run ``task`` exported ({} when it is gone from the history)."""
    run = runs.get_run(task.job_id) if runs is not None and task.job_id else None
    return run.request if run is not None else {}


def _base(task: TaskRecord, runs: Optional[RunStore]) -> str:
    return _request(task, runs).get("model_name") or DEFAULT_MODEL


def _embeds(task: TaskRecord, runs: Optional[RunStore]) -> bool:
    """True when the exported run trained an embedding model: its request says so, or (left empty)
    its base model's folder is one (``ModelKind.serves``)."""
    request = _request(task, runs)
    if request.get("is_embedding") is not None:
        return bool(request["is_embedding"])
    base = request.get("model_name")
    return bool(base) and Path(base).is_dir() and kind_for_folder(Path(base)).serves == "embeddings"


def _finished(task: TaskRecord) -> bool:
    return task.kind == TaskKind.export and task.phase in (TaskPhase.completed, TaskPhase.failed)


def _merged_choice(task: TaskRecord, runs: Optional[RunStore], settings: Settings) -> Optional[ModelChoice]:
    """The merged model ``task`` wrote (None for another format, or when its weights are gone);
    ChatInputError when the task's folder is outside the allowed folders."""
    result = task.result or {}
    if not _finished(task) or result.get("format") != "merged" or not task.output_dir:
        return None
    folder = _folder(task, settings)
    if not folder.is_dir() or has_weights(folder) is not False:
        return None
    check = "check did not pass" if task.phase == TaskPhase.failed or result.get("passed") is False else "check passed"
    request = _request(task, runs)
    return ModelChoice(
        id=task.task_id,
        label=f"{task.model} · merged {result.get('dtype') or ''} ({check})".replace("  ", " "),
        kind="merged",
        base_model=request.get("model_name") or DEFAULT_MODEL,
        path=str(folder),
        job_id=task.job_id,
        created_at=task.finished_at or task.created_at,
        serves=kind_for_folder(folder).serves,  # a merged embedder (sentence-transformers folder) embeds
        query_prompt=request.get("query_prompt"),
    )


def _file_choices(task: TaskRecord, runs: Optional[RunStore], settings: Settings) -> list[ModelChoice]:
    """One choice per GGUF file of ``task`` (see the module docstring); ChatInputError when the
    task's folder is outside the allowed folders or gone."""
    if not _finished(task) or _embeds(task, runs):  # an embedder's GGUF is llama.cpp's, not a chat model
        return []
    entries = [e for e in ((task.result or {}).get("gguf") or []) if isinstance(e, dict)]
    if not entries or not task.output_dir:
        return []
    folder = _folder(task, settings)
    base = _base(task, runs)
    found = []
    for entry in entries:
        name, gguf_type = str(entry.get("name") or ""), str(entry.get("type") or "")
        path = folder / name
        if Path(name).name != name or not name.endswith(".gguf") or not path.is_file():
            continue
        try:  # a link planted in the folder leads nowhere outside it
            path = confine(path, [folder], "GGUF file")
        except PathNotAllowed:
            log.warning("export %s: %s is a link out of its folder; not listed", task.task_id, name)
            continue
        size = path.stat().st_size / 1e6
        found.append(
            ModelChoice(
                id=f"{task.task_id}/{gguf_type}",
                label=f"{task.model} · GGUF {gguf_type} in llama.cpp ({size:.0f} MB, {_check_words(entry, task.phase)})",
                kind="gguf",
                base_model=base,
                path=str(path),
                job_id=task.job_id,
                created_at=task.finished_at or task.created_at,
                gguf_type=gguf_type,
            )
        )
    return found


class ExportModels:
    """The exports' GGUF files and merged models as chat models, for ``ChatEngine(models=...)``
    (see the module docstring). ``tasks``: the tasks table; ``runs``: the run history (the base
    model's name)."""

    def __init__(self, tasks: TaskStore, runs: Optional[RunStore], settings: Settings) -> None:
        self._tasks, self._runs, self._settings = tasks, runs, settings

    def owns(self, model_id: str) -> bool:
        """True when ``model_id`` names an export (job ids start with ``job_``)."""
        return is_export_id(model_id)

    def list(self) -> list[ModelChoice]:
        """Every merged model and GGUF file of the exports in the history, newest export first
        (no GGUF file while llama.cpp is not built here)."""
        gguf = not missing_message(self._settings.llama_cpp_dir)
        found = []
        for task in self._tasks.list(kind=TaskKind.export):
            try:
                merged = _merged_choice(task, self._runs, self._settings)
                found.extend([merged] if merged else _file_choices(task, self._runs, self._settings) if gguf else [])
            except ChatInputError as exc:
                log.debug("not listed: %s", exc)
        return found

    def resolve(self, model_id: str) -> ModelChoice:
        """The merged model or GGUF file ``model_id`` names (``EXPORT_TASK_ID`` or
        ``EXPORT_TASK_ID/TYPE``). Raises UnknownModel (no such export or type) or ChatInputError
        (llama.cpp is not built, the export is running or failed without files, its folder is
        outside the allowed folders, the files are gone)."""
        task_id, _, gguf_type = (model_id or "").strip().partition("/")
        task = self._tasks.get(task_id)
        if task is None or task.kind != TaskKind.export:
            raise UnknownModel(
                f"model {model_id[:120]!r}: no such export; use EXPORT_TASK_ID/TYPE as GET /v1/models lists",
                fields=("model",),
            )
        if task.phase == TaskPhase.running:
            raise ChatInputError(f"export {task_id} is still running; talk to it when it has finished")
        if (task.result or {}).get("format") == "merged":
            merged = _merged_choice(task, self._runs, self._settings)
            if gguf_type or merged is None:
                raise ChatInputError(
                    f"model {model_id[:120]!r}: export {task_id} is a merged model"
                    + (f" (use the id {task_id})" if merged else " whose files were deleted; export the run again"),
                    fields=("model",),
                )
            return merged
        problem = missing_message(self._settings.llama_cpp_dir)
        if problem:
            raise ChatInputError(
                f"model {model_id[:120]!r}: chatting with a GGUF runs it in llama.cpp. {problem}", fields=("model",)
            )
        choices = _file_choices(task, self._runs, self._settings)
        if not choices:
            raise ChatInputError(
                f"export {task_id} ({task.phase.value}) has no GGUF file to talk to (not a GGUF export, "
                "or its files were deleted); export the run again"
            )
        if not gguf_type:
            return choices[0]
        for choice in choices:
            if choice.gguf_type == gguf_type:
                return choice
        have = ", ".join(c.gguf_type or "" for c in choices)
        raise UnknownModel(
            f"model {model_id[:120]!r}: export {task_id} has no {gguf_type!r} file (it has {have})", fields=("model",)
        )
