"""Each run's output folder (and every other folder a run writes into, ``runs.write_folders``):
which folders may be one, the claim a run puts on its folder, and deleting exactly the files a run
wrote.

A run writes only into a folder that is new or empty when it starts; it leaves a marker file there
(``.finetune-studio-run.json``: its job id, and, from its end on, the list of files it wrote). So:
- a second run never writes into another run's folder (item 10 of issue 8);
- Delete removes the files on that list and nothing else, and never touches a folder that is the
  data dir, the uploads or runs folder, the models dir, an allowed root or a parent of one of them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from trainer_core.paths import PathNotAllowed, confine, is_within, resolve, shown
from trainer_core.refusals import Refusal

log = logging.getLogger(__name__)
MARKER = ".finetune-studio-run.json"


class OutputDirError(Refusal):
    """A folder that a run may not write into; the message names the field (``output_dir``,
    ``tensorboard_dir``, ``ray_storage_path``) and the fix."""

    code = "output_dir_taken"


def _protected_problem(folder: Path, protected: Iterable[Path]) -> Optional[str]:
    for raw in protected:
        root = resolve(raw, "protected folder")
        if folder == root:
            return f"is the studio's folder {root}"
        if is_within(root, folder):
            return f"contains the studio's folder {root}"
    return None


def read_marker(folder: Path) -> Optional[dict]:
    """The marker of the run that owns ``folder`` ({"job_id", "files"?}), or None."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("job_id"), str) else None


# What an empty value means, for the messages of the fields that name a folder a run writes into.
EMPTY_MEANS = {"output_dir": "<data dir>/runs/<job id>", "tensorboard_dir": "<run folder>/tensorboard"}


def check_new_folder(
    path: str,
    field: str,
    roots: Iterable[Path],
    protected: Iterable[Path],
    runs: Iterable[tuple[str, str]],
    no_runs_inside: Iterable[Path] = (),
    may_hold_files: bool = False,
) -> Path:
    """The resolved folder ``field`` names, where a run may write: the one rule for every field that
    names a folder the studio writes into (``runs.write_folders``). Raises OutputDirError naming
    ``field`` (or PathNotAllowed) when it is outside ``roots``, is or contains a ``protected``
    folder, lies inside one of ``no_runs_inside`` (the uploads folder), is a file, already holds
    files (unless ``may_hold_files``: a shared storage, in which the run only makes a new folder of
    its own), or lies inside another run's folder (``runs``: (job id, folder) of the runs in the
    history)."""
    folder = confine(path, roots, field)
    for raw in no_runs_inside:
        if is_within(folder, resolve(raw, "uploads folder")):
            raise OutputDirError(
                f"{field}: {shown(folder)} is inside the uploads folder; choose a folder outside it", fields=(field,)
            )
    if problem := _protected_problem(folder, protected):
        fix = (
            f"a new folder for this run (or leave {field} empty for {EMPTY_MEANS[field]})"
            if field in EMPTY_MEANS
            else "another folder"
        )
        raise OutputDirError(f"{field}: {shown(folder)} {problem}; choose {fix}", fields=(field,))
    if folder.exists() and not folder.is_dir():
        raise OutputDirError(f"{field}: {shown(folder)} is a file; choose a new or empty folder", fields=(field,))
    runs = [(job_id, resolve(other, "run folder")) for job_id, other in runs]
    _refuse_inside(field, folder, [(job_id, other) for job_id, other in runs if other in folder.parents])
    if not may_hold_files and folder.exists() and any(folder.iterdir()):
        owner = read_marker(folder)
        whose = f" of run {owner['job_id']}" if owner else ""
        raise OutputDirError(
            f"{field}: {shown(folder)} already holds files{whose}; choose a new or empty folder", fields=(field,)
        )
    _refuse_inside(field, folder, [(job_id, other) for job_id, other in runs if other == folder])
    return folder


def _refuse_inside(field: str, folder: Path, owners: list[tuple[str, Path]]) -> None:
    """Raise OutputDirError naming ``field`` when ``owners`` ((job id, run folder) holding ``folder``) has one."""
    if owners:
        raise OutputDirError(
            f"{field}: {shown(folder)} is inside the folder of another run ({owners[0][0]}); "
            "choose a new or empty folder outside it",
            fields=(field,),
        )


def check_output_dir(
    path: str,
    roots: Iterable[Path],
    protected: Iterable[Path],
    runs: Iterable[tuple[str, str]],
    no_runs_inside: Iterable[Path] = (),
) -> Path:
    """``check_new_folder`` for ``output_dir``: the resolved folder a new run may write into."""
    return check_new_folder(path, "output_dir", roots, protected, runs, no_runs_inside)


def claim(folder: Path, job_id: str, field: str = "output_dir") -> None:
    """Create ``folder`` (new or empty) and mark it as ``job_id``'s. Raises OutputDirError naming
    ``field`` when it is not empty by now (another run took it) or cannot be created."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if any(folder.iterdir()):
            raise OutputDirError(
                f"{field}: {shown(folder)} already holds files; choose a new or empty folder", fields=(field,)
            )
        with (folder / MARKER).open("x", encoding="utf-8") as fh:  # "x": fails if a racer wrote one
            json.dump({"job_id": job_id}, fh)
    except FileExistsError:
        raise OutputDirError(
            f"{field}: {shown(folder)} was just taken by another run; choose another folder", fields=(field,)
        ) from None
    except OSError as exc:
        raise OutputDirError(
            f"{field}: {shown(folder)} cannot be created ({exc.strerror}); choose another folder", fields=(field,)
        ) from None


def release(folder: Path, job_id: str) -> None:
    """Undo ``claim`` (a Start that failed right after it): ``job_id``'s marker goes, and the folder
    when nothing else is in it. A folder that is not ``job_id``'s, or whose run recorded files, is
    left as it is."""
    marker = read_marker(folder)
    if marker is None or marker["job_id"] != job_id or "files" in marker:
        return
    (Path(folder) / MARKER).unlink(missing_ok=True)
    try:
        Path(folder).rmdir()
    except OSError:
        pass


def record_files(folder: Path, job_id: str, under: Optional[Path] = None) -> int:
    """Write the list of files now in ``folder`` (which ``job_id`` owns) into its marker, added to
    the files recorded before (a resumed run writes more). With ``under`` (a folder inside
    ``folder``: an export's or evaluation's own folder) only the files below it are added, so files
    a user put beside the run's are never taken for the run's. Returns the number recorded; 0 and
    no change when the folder is not this run's (or ``under`` is not inside it)."""
    folder = Path(folder)
    marker = read_marker(folder)
    if marker is None or marker["job_id"] != job_id:
        return 0
    if under is not None and not is_within(resolve(under, "task folder"), resolve(folder, "run folder")):
        return 0
    files = set(marker.get("files", []))
    for path in (Path(under) if under is not None else folder).rglob("*"):
        if (path.is_file() or path.is_symlink()) and path.name != MARKER:
            files.add(path.relative_to(folder).as_posix())
    tmp = folder / f"{MARKER}.tmp"
    tmp.write_text(json.dumps({"job_id": job_id, "files": sorted(files)}), encoding="utf-8")
    os.replace(tmp, folder / MARKER)
    return len(files)


@dataclass
class Deletion:
    """What deleting a run's files did: files removed, paths kept (not written by the run), and the
    reason nothing was removed (when nothing was)."""

    removed: int = 0
    kept: list[str] = field(default_factory=list)
    refused: Optional[str] = None


def delete_run_files(
    output_dir: str, job_id: str, roots: Iterable[Path], protected: Iterable[Path], default_folder: Path
) -> Deletion:
    """Delete the files run ``job_id`` wrote in ``output_dir``; nothing else. Folders emptied by it
    go too. Nothing is removed (``refused`` says why) when the folder lies outside ``roots``, is or
    contains a protected folder, or is not marked as this run's (except a legacy run's own
    ``default_folder``, ``<runs>/<job id>``, which the studio made for it)."""
    try:
        folder = confine(output_dir, roots, "output_dir")
    except PathNotAllowed:
        return Deletion(refused=f"its folder {output_dir} is outside the allowed folders")
    if not folder.is_dir():
        return Deletion()
    if problem := _protected_problem(folder, protected):
        return Deletion(refused=f"its folder {problem}")
    marker = read_marker(folder)
    if marker is None and folder == resolve(default_folder, "run folder") and folder.name == job_id:
        count = sum(1 for p in folder.rglob("*") if p.is_file())
        shutil.rmtree(folder)
        return Deletion(removed=count)
    if marker is None or marker["job_id"] != job_id:
        return Deletion(refused=f"its folder {folder} was not created by this run")
    if "files" not in marker:
        record_files(folder, job_id)  # a run that never recorded its end: everything since its claim
        marker = read_marker(folder) or marker
    return _remove_listed(folder, marker.get("files", []))


def _remove_listed(folder: Path, files: list[str]) -> Deletion:
    result = Deletion()
    parents: set[Path] = set()
    for relative in files:
        path = folder / relative
        if not is_within(Path(os.path.realpath(path.parent)), folder):  # never through a swapped-in link
            continue
        if path.is_file() or path.is_symlink():
            path.unlink()
            result.removed += 1
            parents.update(p for p in path.parents if is_within(p, folder) and p != folder)
    for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        if parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
    (folder / MARKER).unlink(missing_ok=True)
    result.kept = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    if not any(folder.iterdir()):
        folder.rmdir()
    return result
