"""Every folder a run writes into, whichever field names it, passes one rule set
(``folders.check_new_folder``, the rules ``output_dir`` has always had):

- ``output_dir``: the run folder; new or empty, claimed (``folders.claim``) at Start.
- ``tensorboard_dir``: TensorBoard's event files. Inside the run's own folder it is part of the run;
  anywhere else it must be a new or empty folder that is not a studio folder, an allowed root, a
  parent of one, inside ``uploads/`` or inside another run's folder, and the run claims it beside
  its run folder (marker), records its files at the end and Delete removes them (``delete_run``).
  A resumed run keeps the folder it claimed before.
- ``ray_storage_path`` (a local folder; a URI is the cluster's own storage): shared by runs, so it
  may hold files, but it is not a studio folder or a parent of one, not inside ``uploads/`` and not
  inside a run's folder; a run only makes a new folder of its own in it, named from its job id,
  and deletes only that (``distributed.ray_storage``). An allowed root may be the storage.

No other field of any request names a folder the studio writes into: exports and evaluations write
into new folders of their own inside the run folder (``exports/<id>``, ``evaluations/<id>``), the
trackers other than TensorBoard write inside the run folder (``training.trackers``), and the CLI's
``--output`` flags are the operator's own (new or empty folders)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from trainer_core.distributed.ray_storage import is_uri
from trainer_core.paths import PathNotAllowed, confine, is_within, resolve, shown
from trainer_core.runs.folders import (
    Deletion,
    OutputDirError,
    check_new_folder,
    claim,
    delete_run_files,
    read_marker,
    record_files,
    release,
)
from trainer_core.runs.records import RunRecord
from trainer_core.runs.store import RunStore
from trainer_core.settings import Settings

CLAIMED_FIELDS = ("tensorboard_dir",)  # folders a run claims beside its run folder


def run_folders(store: Optional[RunStore]) -> list[tuple[str, str]]:
    """(job id, folder) of every folder the runs in the history write into: each run folder and
    each folder a run named in ``CLAIMED_FIELDS``."""
    if store is None:
        return []
    found = []
    for job_id, output_dir, *claimed in store.run_folders(CLAIMED_FIELDS):
        found.append((job_id, output_dir))
        found += [(job_id, str(folder)) for folder in claimed if folder]
    return found


def check_write_folders(
    request: Any, settings: Settings, store: Optional[RunStore], resumed: Optional[RunRecord] = None
) -> dict[str, str]:
    """The resolved ``output_dir`` / ``tensorboard_dir`` / ``ray_storage_path`` of ``request`` (its
    paths already confined, ``admission.request_paths``), each checked by the rule of the module; ``resumed``
    is the run a resume continues (its folder and the folders it claimed are its own). Returns the
    updates for the request. Raises OutputDirError or PathNotAllowed naming the field."""
    others = [(job, folder) for job, folder in run_folders(store) if resumed is None or job != resumed.job_id]
    roots, uploads = settings.allowed_roots, [settings.uploads_dir]
    updates: dict[str, str] = {}
    own: Optional[Path] = Path(resumed.output_dir) if resumed is not None else None
    if resumed is None and request.output_dir:
        own = check_new_folder(request.output_dir, "output_dir", roots, settings.protected_dirs, others, uploads)
        updates["output_dir"] = str(own)
    if request.tensorboard_dir:
        updates["tensorboard_dir"] = str(_tensorboard_folder(request.tensorboard_dir, own, resumed, settings, others))
    if request.ray_storage_path and not is_uri(request.ray_storage_path):
        storage = check_new_folder(
            request.ray_storage_path,
            "ray_storage_path",
            roots,
            settings.studio_dirs,
            others,
            uploads,
            may_hold_files=True,
        )
        updates["ray_storage_path"] = str(storage)
    return updates


def _tensorboard_folder(
    path: str, own: Optional[Path], resumed: Optional[RunRecord], settings: Settings, others: list
) -> Path:
    """``tensorboard_dir`` checked: inside the run's own folder, the folder a resumed run claimed,
    or a new folder that passes ``check_new_folder`` and does not hold the run folder."""
    folder = confine(path, settings.allowed_roots, "tensorboard_dir")
    if own is not None and is_within(folder, resolve(own, "run folder")):
        return folder
    marker = read_marker(folder)
    if resumed is not None and marker is not None and marker["job_id"] == resumed.job_id:
        return folder
    folder = check_new_folder(
        path, "tensorboard_dir", settings.allowed_roots, settings.protected_dirs, others, [settings.uploads_dir]
    )
    if own is not None and is_within(resolve(own, "run folder"), folder):
        raise OutputDirError(
            f"tensorboard_dir: {shown(folder)} holds the run's output_dir; choose a folder inside the run folder "
            "or beside it",
            fields=("tensorboard_dir", "output_dir"),
        )
    return folder


def claimed_folders(request: Any, output_dir: Path) -> list[tuple[str, Path]]:
    """(field, folder) of each folder ``request`` (a request or its stored dict) names in
    ``CLAIMED_FIELDS`` outside ``output_dir``, resolved."""
    run = resolve(output_dir, "run folder")
    found = []
    for field in CLAIMED_FIELDS:
        value = request.get(field) if isinstance(request, dict) else getattr(request, field, None)
        if value:
            try:
                folder = resolve(value, field)
            except PathNotAllowed:
                continue
            if not is_within(folder, run):
                found.append((field, folder))
    return found


def claim_folders(request: Any, output_dir: Path, job_id: str) -> None:
    """Claim ``request``'s folders beside ``output_dir`` (``claimed_folders``) for ``job_id``, except
    those it claimed before (a resume). On a refusal the folders claimed here are released. Raises
    OutputDirError naming the field (the folder was taken meanwhile, or cannot be made)."""
    taken: list[Path] = []
    try:
        for field, folder in claimed_folders(request, output_dir):
            marker = read_marker(folder)
            if marker is None or marker["job_id"] != job_id:
                claim(folder, job_id, field)
                taken.append(folder)
    except OutputDirError:
        for folder in taken:
            release(folder, job_id)
        raise


def record_claimed(request: Any, output_dir: Path, job_id: str) -> int:
    """Record the files now in ``request``'s claimed folders beside ``output_dir`` (``folders.
    record_files``; a folder not marked as ``job_id``'s records nothing). Returns the files recorded."""
    return sum(record_files(folder, job_id) for _, folder in claimed_folders(request, output_dir))


def delete_run(run: RunRecord, roots: Iterable[Path], protected: Iterable[Path], runs_dir: Path) -> Deletion:
    """Delete the files run ``run`` wrote: in its run folder (``folders.delete_run_files``, whose
    refusal is the answer's) and in each folder it claimed beside it (files kept there are listed
    with their folder; a folder not marked as the run's is left alone)."""
    roots, protected = list(roots), list(protected)
    result = delete_run_files(run.output_dir, run.job_id, roots, protected, runs_dir / run.job_id)
    for _, folder in claimed_folders(run.request, Path(run.output_dir)):  # never the run's legacy default folder
        beside = delete_run_files(str(folder), run.job_id, roots, protected, Path(run.output_dir))
        result.removed += beside.removed
        result.kept += [str(folder / name) for name in beside.kept]
    return result


__all__ = [
    "CLAIMED_FIELDS",
    "check_write_folders",
    "claim_folders",
    "claimed_folders",
    "delete_run",
    "record_claimed",
    "run_folders",
]
