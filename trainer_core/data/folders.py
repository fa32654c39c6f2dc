"""A folder given as a dataset: its data files (one kind, the ``train`` split), or a folder written
by ``datasets``' ``save_to_disk``.

Which files form the training split follows ``datasets``' own naming rules
(``datasets.data_files.get_data_patterns``: ``train-*``, ``data/train-00000-of-00001.parquet``, or
every file when no name says a split). Only files in the folder or one level down are read, hidden
ones never; JSON files that hold one object or a bare value instead of rows (a stray
``report.json``) are left out with a notice naming them.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import datasets
from datasets.data_files import DataFilesDict, get_data_patterns

from trainer_core.data.compressed import BUILDERS, data_suffix, is_data_file, read_text, split_suffix
from trainer_core.data.errors import DatasetError

log = logging.getLogger(__name__)

SAVED_MARKERS = (("dataset_info.json", "state.json"), ("dataset_dict.json",))  # Dataset / DatasetDict.save_to_disk
KINDS = ".json/.jsonl/.csv/.parquet/.txt"
SHOWN_NAMES = 3  # file names listed in a notice
ROWS_PREFIX = 64 * 1024  # decompressed bytes of a .json file looked at to tell rows from one object


@dataclass
class FolderPlan:
    """What reading ``folder`` takes: ``files`` (data files of one kind, in name order; empty for a
    saved dataset), ``saved`` (written by ``save_to_disk``) and ``notices`` (files left out, why)."""

    folder: Path
    files: list[Path] = field(default_factory=list)
    saved: bool = False
    notices: list[str] = field(default_factory=list)


def is_saved_dataset(folder: Path) -> bool:
    """True when ``folder`` was written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``."""
    return any(all((folder / name).is_file() for name in names) for names in SAVED_MARKERS)


def folder_paths(folder: Path) -> list[Path]:
    """Every path that reading ``folder`` may open, unresolved (symlinks as they are), for the
    caller to confine (``admission.request_paths.confine_dataset`` resolves each one): for a saved dataset
    its files and symlinks, every split folder ``dataset_dict.json`` names and every data file its
    ``state.json`` names (joined to the split folder, so an absolute name or ``..`` shows as the
    path ``datasets.load_from_disk`` would open); else the data files in the folder and one level
    down (not hidden), which include every file ``plan_folder`` picks. Raises DatasetError for a
    malformed ``dataset_dict.json`` / ``state.json`` inside the folder (one that resolves outside it
    is not read here: it is listed for the caller to refuse), OSError when the folder cannot be
    listed."""
    if is_saved_dataset(folder):
        found = {path for path in folder.rglob("*") if path.is_file() or path.is_symlink()}
        return sorted(found | set(saved_paths(folder, inside_only=False)))
    return _listing(folder)


def saved_paths(folder: Path, inside_only: bool = True) -> list[Path]:
    """The paths ``datasets.load_from_disk(folder)`` opens, unresolved, in that order: for a
    ``DatasetDict`` its ``dataset_dict.json`` and each split folder it names, and for each
    ``Dataset`` (the folder itself, or each split folder) its ``state.json``, ``dataset_info.json``
    and the data files ``state.json`` names (``_data_files[].filename``, joined to that folder).

    JSON files that resolve outside ``folder`` are not read. With ``inside_only`` any listed path
    that resolves outside ``folder`` (an absolute name, ``..``, a symlink leaving it: never written
    by ``save_to_disk``) raises DatasetError naming it; without it such paths are returned (and the
    files below an outside split folder are not listed). Raises DatasetError for a malformed
    ``dataset_dict.json`` or ``state.json``, naming the file and the fix."""
    root = folder.resolve()
    paths: list[Path] = []

    def inside(path: Path, named_in: str) -> bool:
        try:
            if Path(os.path.realpath(path)).is_relative_to(root):
                return True
        except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop: not a usable path
            pass
        if inside_only:
            raise DatasetError(
                f"folder {folder.name}: {named_in} leads to {path}, outside the dataset folder "
                "(save_to_disk keeps its splits and data files inside it): save the dataset again "
                "with save_to_disk, or give the split's own folder"
            )
        return False

    if all((folder / name).is_file() for name in SAVED_MARKERS[0]):
        datasets_at = [folder]
    else:
        marker = folder / "dataset_dict.json"
        paths.append(marker)
        splits = _saved_json(folder, marker, "splits") if inside(marker, marker.name) else []
        datasets_at = []
        for split in splits:
            at = folder / split
            paths.append(at)
            if inside(at, f"the split {split!r} of dataset_dict.json"):
                datasets_at.append(at)
    for at in datasets_at:
        state = at / "state.json"
        paths += [state, at / "dataset_info.json"]
        if not inside(state, _shown(state, folder)):
            continue
        for name in _saved_json(folder, state, "_data_files"):
            paths.append(at / name)
            inside(at / name, f"the data file {name!r} of {_shown(state, folder)}")
    return paths


def _shown(path: Path, folder: Path) -> str:
    """``path`` relative to ``folder`` when it is below it by name, else as it is."""
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return str(path)


MAX_SAVED_JSON = 64 * 1024**2  # bytes of a save_to_disk dataset_dict.json / state.json read at most


def _saved_json(folder: Path, file: Path, key: str) -> list[str]:
    """The names under ``key`` of a save_to_disk JSON file: ``splits`` of dataset_dict.json (a list
    of split names) or ``_data_files`` of state.json (a list of {"filename": name}). Raises
    DatasetError naming the file when it is missing, unreadable, too large or not of that shape."""
    where = f"folder {folder.name}: {_shown(file, folder)}"
    fix = "save the dataset again with save_to_disk"
    if not file.is_file():
        raise DatasetError(f"{where} is missing (or not a file): {fix}")
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_SAVED_JSON + 1)
        if len(raw) > MAX_SAVED_JSON:
            raise DatasetError(f"{where} is larger than {MAX_SAVED_JSON // 1024**2} MB: {fix}")
        data = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise DatasetError(f"{where} cannot be read ({exc.strerror}): check its permissions") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{where} is not valid JSON ({exc}): {fix}") from None
    entries = data.get(key) if isinstance(data, dict) else None
    if key == "_data_files" and isinstance(entries, list) and all(isinstance(e, dict) for e in entries):
        entries = [entry.get("filename") for entry in entries]
    if not isinstance(entries, list) or not all(isinstance(name, str) and name for name in entries):
        shape = (
            '{"splits": ["train", ...]}'
            if key == "splits"
            else '{"_data_files": [{"filename": "data-00000-of-00001.arrow"}, ...]}'
        )
        raise DatasetError(f"{where} does not hold {shape}: {fix}")
    return entries


def _listing(folder: Path) -> list[Path]:
    """Data files (by name) in ``folder`` and its sub-folders, not hidden, sorted."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        inner = sorted(entry.iterdir()) if entry.is_dir() else [entry]
        found += [path for path in inner if not path.name.startswith(".") and path.is_file() and is_data_file(path)]
    return found


def plan_folder(folder: Path) -> FolderPlan:
    """The files to read for ``folder`` (see the module text). Raises DatasetError when it has no
    data files, no training split, or data files of more than one kind (naming them)."""
    if is_saved_dataset(folder):
        return FolderPlan(folder, saved=True)
    listed = _listing(folder)
    if not listed:
        raise DatasetError(
            f"folder {folder.name} has no {KINDS} data files: put data files in it (or one level "
            "down, e.g. data/train.jsonl), or give the path of a data file"
        )
    splits = _splits(folder, set(listed))
    if "train" not in splits:
        raise DatasetError(
            f"folder {folder.name} has no training files, only the split(s) {sorted(splits)}: name "
            "training files train* (e.g. train.jsonl), or give the files themselves"
        )
    plan = FolderPlan(folder)
    chosen = splits.pop("train")
    for split, files in sorted(splits.items()):
        plan.notices.append(
            f"folder {folder.name}: its {split} files ({_names(folder, files)}) are not read for "
            "training; give them as evaluation data if they are"
        )
    unsplit = [path for path in listed if path not in chosen and not any(path in files for files in splits.values())]
    if unsplit:
        plan.notices.append(
            f"folder {folder.name}: {_names(folder, unsplit)} left out: their names say no split "
            "while other files are named train*"
        )
    for path in chosen:
        reason = _not_rows(path)
        if reason:
            plan.notices.append(f"folder {folder.name}: {path.relative_to(folder)} left out: {reason}")
        else:
            plan.files.append(path)
    if not plan.files:
        raise DatasetError(f"folder {folder.name} has no {KINDS} data files with rows: " + "; ".join(plan.notices))
    _one_kind(folder, plan.files)
    for notice in plan.notices:
        log.info(notice)
    return plan


def _splits(folder: Path, listed: set[Path]) -> dict[str, list[Path]]:
    """split name -> data files of ``listed``, by ``datasets``' naming rules."""
    try:
        patterns = get_data_patterns(str(folder))
    except datasets.exceptions.DataFilesNotFoundError:  # pragma: no cover - listed is not empty
        return {}
    resolved = DataFilesDict.from_patterns(patterns, base_path=str(folder))
    splits = {str(split): [Path(p) for p in files if Path(p) in listed] for split, files in resolved.items()}
    return {split: sorted(files) for split, files in splits.items() if files}


def _not_rows(path: Path) -> str:
    """Why a JSON file holds no rows ('' when it may: syntax errors are reported when it is read).
    Looks at the first ``ROWS_PREFIX`` decompressed bytes only, unless the first JSON value runs past
    them (then at the whole text, capped as ``compressed.read_text`` caps it)."""
    ext = split_suffix(path)[0]
    if ext != ".json":
        return ""
    try:
        text = read_text(path, limit=ROWS_PREFIX)
        if len(text.encode("utf-8")) > ROWS_PREFIX - 8 and _first_value_end(text.lstrip()) is None:
            text = read_text(path)  # maybe cut inside the first value: decide on the whole text
    except Exception:  # noqa: BLE001 - unreadable (or too large): the reader names the problem
        return ""
    start = text.lstrip()
    if start.startswith("[") or not start:
        return ""
    if start.startswith("{"):
        end = _first_value_end(start)
        if end is not None and start[end:].strip():
            return ""  # more after the first object: JSON lines (or a syntax error the reader reports)
        return "it holds one JSON object, not rows"
    return "it holds a single JSON value, not rows"


def _first_value_end(text: str) -> Optional[int]:
    """Index just after the first JSON value of ``text``, or None when it does not end in ``text``."""
    try:
        return json.JSONDecoder().raw_decode(text)[1]
    except json.JSONDecodeError:
        return None


def _one_kind(folder: Path, files: list[Path]) -> None:
    """DatasetError when ``files`` are of more than one kind (JSON, CSV, Parquet, text)."""
    kinds: dict[str, Path] = {}
    for path in files:
        kinds.setdefault(BUILDERS[split_suffix(path)[0]], path)
    if len(kinds) > 1:
        examples = ", ".join(f"{path.relative_to(folder)} ({data_suffix(path)})" for path in kinds.values())
        raise DatasetError(
            f"folder {folder.name} mixes kinds of data files: {examples}; keep one kind of file "
            "(one layout) in the folder, or give the files one by one"
        )


def _names(folder: Path, files: list[Path]) -> str:
    """Up to SHOWN_NAMES relative names and a count of the rest."""
    names = [str(path.relative_to(folder)) for path in files[:SHOWN_NAMES]]
    more = len(files) - SHOWN_NAMES
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def load_saved(folder: Path) -> datasets.Dataset:
    """The rows of a ``save_to_disk`` folder (``datasets.load_from_disk``, in memory): a Dataset, or
    the ``train`` split of a DatasetDict. Every path it opens is checked first (``saved_paths``): a
    split folder or data file named outside the folder is refused, not read. Raises DatasetError
    when the layout is malformed or leads out of the folder, when it cannot be loaded, or when a
    DatasetDict has no ``train`` split (naming the splits it has)."""
    saved_paths(folder)  # DatasetError for a malformed layout or a name leading out of the folder
    try:
        loaded = datasets.load_from_disk(str(folder), keep_in_memory=True)
    except Exception as exc:  # noqa: BLE001 - datasets raises several kinds for a damaged folder
        raise DatasetError(
            f"folder {folder.name} looks written by save_to_disk but cannot be loaded ({exc}): "
            "save it again with Dataset.save_to_disk"
        ) from exc
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise DatasetError(
                f"folder {folder.name} holds the splits {sorted(loaded)} but no 'train' split: save "
                "the training rows as 'train', or give the split's folder (e.g. "
                f"{folder.name}/{sorted(loaded)[0]})"
            )
        loaded = loaded["train"]
    return loaded
