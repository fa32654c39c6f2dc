"""A Ray run's files through the storage path the user sets (``ray_storage_path``): a folder every
node of the cluster sees (NFS, a mounted bucket) or a filesystem URI pyarrow opens (``s3://``,
``gs://``, ``abfss://``, ``hdfs://``), Ray Train's own ``RunConfig.storage_path``.

Layout under ``<storage>/<staging>/``: a folder the driver makes for this launch of the run
(``staging_name``: ``studio-<job id>-<8 hex>``, never a name from the user's paths), only if
nothing is there yet, and marks as the run's (``OWNER``: its job id; ``open_staging``):

- ``inputs/<field>/<n>/<name>``: the files and folders the studio checked (``admission.request_paths``)
  and the driver copied there before the workers start (``stage_inputs``): datasets, a local model
  folder, the checkpoint to resume, the adapter to continue, the reward file, and the run folder's
  ``metrics.jsonl`` (a resumed run's earlier steps). The workers never see the studio's paths; they
  copy these down (``training.ray_files``).
- ``checkpoint-N/``: each checkpoint, reported by every worker through Ray Train's
  ``ray.train.report(checkpoint=...)`` (rank 0's weights and state and the run's ``metrics.jsonl``
  so far, each rank's random state).
- ``final/``: what rank 0 wrote in its run folder at the end (adapter, ``metrics.jsonl``, logs),
  reported the same way.

``fetch_outputs`` copies the checkpoints and ``final/`` into the run folder on the studio's
machine (after the run, also a failed one: its last checkpoint stays resumable), and ``remove_run``
then deletes the staging folder (a model's copy there can be gigabytes): only a folder that carries
this run's marker, so a folder the run did not make is never read back or deleted.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from pathlib import Path
from typing import Any, Optional

URI = re.compile(r"^[a-z][a-z0-9+.-]*://")
INPUT_FIELDS = ("local_datasets", "local_eval_datasets", "model_name", "resume_from_checkpoint",
                "adapter_name_or_path", "reward_file")  # fmt: skip
METRICS = "metrics.jsonl"
CHECKPOINT = re.compile(r"^checkpoint-\d+$")
FINAL = "final"
OWNER = ".finetune-studio-ray.json"  # in a staging folder: {"job_id": ...} of the run that made it


def is_uri(storage: str) -> bool:
    """True for a filesystem URI (``s3://bucket/x``), False for a folder path."""
    return bool(URI.match(storage))


def _fs(storage: str) -> tuple[Any, str]:
    """(pyarrow filesystem, root path inside it) for ``storage``."""
    import pyarrow.fs as pafs

    if is_uri(storage):
        return pafs.FileSystem.from_uri(storage)
    return pafs.LocalFileSystem(), str(Path(storage).resolve())


def input_paths(request: Any, output_dir: Path) -> dict[str, list[str]]:
    """The checked local paths of ``request`` a remote worker needs, by field (``INPUT_FIELDS``;
    ``model_name`` only when it is a local folder, a Hub id is fetched by the workers), and the run
    folder's ``metrics.jsonl`` under ``metrics`` when a resumed run has one. Paths only: no secrets."""
    found: dict[str, list[str]] = {}
    for field in INPUT_FIELDS:
        value = getattr(request, field)
        values = value if isinstance(value, list) else [value] if value else []
        if field == "model_name":
            values = [v for v in values if Path(v).expanduser().is_dir()]
        if values:
            found[field] = [str(Path(v).expanduser()) for v in values]
    if (Path(output_dir) / METRICS).is_file():
        found["metrics"] = [str(Path(output_dir) / METRICS)]
    return found


def stage_inputs(storage: str, name: str, inputs: dict[str, list[str]]) -> dict[str, list[str]]:
    """Copy ``inputs`` (``input_paths``) to ``<storage>/<name>/inputs``; returns the same mapping with
    each path as its place under that folder (``<field>/<n>/<name>``). Raises OSError (pyarrow's
    errors are OSError) when the storage cannot be written."""
    import pyarrow.fs as pafs

    fs, root = _fs(storage)
    staged: dict[str, list[str]] = {}
    for field, paths in inputs.items():
        for n, path in enumerate(paths):
            relative = f"{field}/{n}/{Path(path).name}"
            target = f"{root}/{name}/inputs/{relative}"
            if Path(path).is_dir():
                fs.create_dir(target, recursive=True)
            else:
                fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
            pafs.copy_files(path, target, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
            staged.setdefault(field, []).append(relative)
    return staged


def fetch_inputs(storage: str, name: str, staged: dict[str, list[str]], scratch: Path) -> dict[str, list[str]]:
    """The worker's side of ``stage_inputs``: copy each staged input under ``scratch``; returns the
    mapping with local paths. Raises OSError."""
    import pyarrow.fs as pafs

    fs, root = _fs(storage)
    local: dict[str, list[str]] = {}
    for field, places in staged.items():
        for relative in places:
            source, target = f"{root}/{name}/inputs/{relative}", scratch / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            info = fs.get_file_info(source)
            if info.type == pafs.FileType.Directory:
                target.mkdir(parents=True, exist_ok=True)
            pafs.copy_files(source, str(target), source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
            local.setdefault(field, []).append(str(target))
    return local


def fetch_outputs(storage: str, name: str, run_folder: Path, job_id: str) -> list[str]:
    """Copy the run's reported checkpoints (``checkpoint-N``) and ``final/`` from its staging folder
    ``<storage>/<name>`` (only one that carries ``job_id``'s marker) into ``run_folder`` (a
    checkpoint already there is kept); without ``final/`` (the run ended early), the newest
    checkpoint's ``metrics.jsonl`` becomes the run's. Returns what was copied, by name. Raises
    OSError when the storage cannot be read."""
    import pyarrow.fs as pafs

    if not owns(storage, name, job_id):
        return []
    fs, root = _fs(storage)
    base = f"{root}/{name}"
    copied = []
    entries = fs.get_file_info(pafs.FileSelector(base))
    for entry in sorted(entries, key=lambda e: (e.base_name == FINAL, e.base_name)):
        if entry.type != pafs.FileType.Directory:
            continue
        if CHECKPOINT.match(entry.base_name):
            target = Path(run_folder) / entry.base_name
            if target.exists():
                continue
        elif entry.base_name == FINAL:
            target = Path(run_folder)
        else:
            continue
        target.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(entry.path, str(target), source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
        copied.append(entry.base_name)
    if FINAL not in copied:  # the run ended early: its metrics as of the last checkpoint
        kept = sorted((p for p in Path(run_folder).glob("checkpoint-*") if (p / METRICS).is_file()),
                      key=lambda p: int(p.name.split("-")[1]))  # fmt: skip
        if kept:
            shutil.copyfile(kept[-1] / METRICS, Path(run_folder) / METRICS)
    return copied


def storage_problem(storage: Optional[str]) -> Optional[str]:
    """Why ``ray_storage_path`` cannot be used from here (a URI whose filesystem pyarrow cannot open,
    e.g. credentials or the scheme's library missing), naming the field; None when it can."""
    if not storage or not is_uri(storage):
        return None
    try:
        _fs(storage)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid / OSError / ImportError by scheme
        return f"ray_storage_path: {storage} cannot be opened here ({str(exc).splitlines()[0][:200]})"
    return None


def staging_name(job_id: str) -> str:
    """The name of a launch's staging folder: ``studio-<job id>-<8 hex>``. From the job id, never
    from a user's folder name, so it is never a run folder (``<runs>/<job id>``) nor a user's folder;
    a fresh suffix per launch (a Resume launches the same job again), so it is new each time."""
    return f"studio-{job_id}-{secrets.token_hex(4)}"


def open_staging(storage: str, name: str, job_id: str) -> None:
    """Make ``<storage>/<name>`` and mark it as ``job_id``'s (``OWNER``), only when nothing is there:
    a local folder is made atomically (``mkdir``); in a bucket the name is checked free first.
    Raises FileExistsError when it exists (never taken over) and OSError when it cannot be made."""
    fs, root = _fs(storage)
    base = f"{root}/{name}"
    if is_uri(storage):
        import pyarrow.fs as pafs

        if fs.get_file_info(base).type != pafs.FileType.NotFound:
            raise FileExistsError(f"{base} already exists")
        fs.create_dir(base, recursive=True)
    else:
        Path(root).mkdir(parents=True, exist_ok=True)
        Path(base).mkdir()  # FileExistsError when anything is there
    with fs.open_output_stream(f"{base}/{OWNER}") as out:
        out.write(json.dumps({"job_id": job_id}).encode())


def owns(storage: str, name: str, job_id: str) -> bool:
    """True when ``<storage>/<name>`` carries ``job_id``'s marker (``open_staging``)."""
    if not name or "/" in name or name in (".", ".."):
        return False
    fs, root = _fs(storage)
    try:
        with fs.open_input_stream(f"{root}/{name}/{OWNER}") as marker:
            data = json.loads(marker.read(4096).decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("job_id") == job_id


def remove_run(storage: str, name: str, job_id: str) -> bool:
    """Delete ``<storage>/<name>`` (the staged inputs, the reported checkpoints and ``final``, Ray
    Train's state) once ``fetch_outputs`` has copied what the run folder needs, when it carries
    ``job_id``'s marker; anything else is left as it is. Returns whether it was deleted. Raises
    OSError when the storage refuses."""
    if not owns(storage, name, job_id):
        return False
    fs, root = _fs(storage)
    fs.delete_dir(f"{root}/{name}")
    return True
