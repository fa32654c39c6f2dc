"""Checks on a request's local paths before a job starts: confinement to allowed roots, existence."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from trainer_core.distributed.launch import ScalingError
from trainer_core.distributed.ray_storage import is_uri
from trainer_core.models.hub import looks_like_path
from trainer_core.paths import PathNotAllowed, confine
from trainer_core.refusals import Refusal
from trainer_core.schemas import TrainingStartRequest


class MissingPaths(Refusal):
    """Dataset files or folders that do not exist; ``paths`` holds up to three of them, resolved."""

    code = "missing_files"

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths[:3]
        super().__init__(f"local_datasets: file not found: {', '.join(self.paths)}", fields=("local_datasets",))


def confine_dataset(path: str, roots: list[Path], field: str) -> str:
    """``path`` resolved and confined to ``roots``; for a folder, every file reading it may open
    (``data.folders.folder_paths``: its data files, a saved dataset's files) is confined too, so a
    symlink inside it that points out of the roots is refused. Raises PathNotAllowed."""
    resolved = confine(path, roots, field)
    if resolved.is_dir():
        from trainer_core.data.folders import folder_paths

        try:
            inside = folder_paths(resolved)
        except OSError as exc:
            raise PathNotAllowed(
                f"{field}: the folder {resolved.name} cannot be listed ({exc.strerror})", fields=(field,)
            ) from None
        for file in inside:
            confine(file, roots, field)
    return str(resolved)


def checked_request(request: TrainingStartRequest, roots: Iterable[Path]) -> TrainingStartRequest:
    """A copy of ``request`` with every local path resolved and confined to ``roots``.

    Dataset paths may be files or folders (see ``confine_dataset``); ``distributed_config`` must be a
    file; ``audio_codec`` is confined where it is a folder path. Raises PathNotAllowed (a path
    outside the roots, through ``..`` or a symlink, also one inside a dataset folder), MissingPaths (dataset paths that do not exist) or ScalingError (no such
    ``distributed_config`` file)."""
    roots = list(roots)
    train = [confine_dataset(p, roots, "local_datasets") for p in request.local_datasets]
    evals = [confine_dataset(p, roots, "local_eval_datasets") for p in request.local_eval_datasets]
    updates: dict = {"local_datasets": train, "local_eval_datasets": evals}
    for field in ("output_dir", "resume_from_checkpoint", "distributed_config", "tensorboard_dir", "reward_file"):
        value = getattr(request, field)
        if value:
            updates[field] = str(confine(value, roots, field))
    if request.ray_storage_path and not is_uri(request.ray_storage_path):  # a URI is the cluster's storage
        storage = confine(request.ray_storage_path, roots, "ray_storage_path")
        if storage.exists() and not storage.is_dir():
            raise PathNotAllowed(
                f"ray_storage_path: {storage.name} is a file: give a folder (it is made if missing)",
                fields=("ray_storage_path",),
            )
        updates["ray_storage_path"] = str(storage)
    if request.distributed_config and not Path(updates["distributed_config"]).is_file():
        raise ScalingError(
            f"distributed_config: file not found: {updates['distributed_config']}: give the path of "
            f"your {'accelerate FSDP YAML' if request.distributed == 'fsdp' else 'DeepSpeed JSON'} file",
            fields=("distributed_config",),
        )
    if looks_like_path(request.audio_codec):  # else a Hub id, looked up in the Hub cache only
        updates["audio_codec"] = str(confine(request.audio_codec, roots, "audio_codec"))
    if request.adapter_name_or_path:
        updates["adapter_name_or_path"] = confine_adapter(request.adapter_name_or_path, roots)
    missing = [p for p in train + evals if not (Path(p).is_file() or Path(p).is_dir())]
    if missing:
        raise MissingPaths(missing)
    return request.model_copy(update=updates)


def confine_adapter(path: str, roots: list[Path]) -> str:
    """``adapter_name_or_path`` resolved and confined to ``roots``; it must be a folder holding a
    PEFT adapter (``adapter_config.json``). Raises PathNotAllowed (outside the roots) or
    MissingPaths-like ValueError naming the field and the fix."""
    resolved = confine(path, roots, "adapter_name_or_path")
    if not (resolved / "adapter_config.json").is_file():
        raise AdapterMissing(
            f"adapter_name_or_path: {resolved} holds no LoRA adapter (no adapter_config.json): "
            "choose the output folder of a LoRA or QLoRA run (or one of its checkpoint-N folders)",
            fields=("adapter_name_or_path",),
        )
    return str(resolved)


class AdapterMissing(Refusal):
    """``adapter_name_or_path`` names a folder without a PEFT adapter; the message says which."""

    code = "adapter_missing"


__all__ = ["AdapterMissing", "MissingPaths", "PathNotAllowed", "checked_request", "confine_dataset"]
