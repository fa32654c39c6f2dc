"""A folder given as a dataset: its data files (one kind, the ``train`` split), or a folder written
by ``datasets``' ``save_to_disk``.

Which files form the training split follows ``datasets``' own naming rules
(``datasets.data_files.get_data_patterns``: ``train-*``, ``data/train-00000-of-00001.parquet``, or
every file when no name says a split). Only files in the folder or one level down are read, hidden
ones never; JSON files that hold one object or a bare value instead of rows (a stray
``report.json``) are left out with a notice naming them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import datasets
from datasets.data_files import DataFilesDict, get_data_patterns

from trainer_core.data.compressed import BUILDERS, data_suffix, is_data_file, read_text, split_suffix
from trainer_core.data.errors import DatasetError
from trainer_core.data.json_check import looks_like_lines

log = logging.getLogger(__name__)

SAVED_MARKERS = (("dataset_info.json", "state.json"), ("dataset_dict.json",))  # Dataset / DatasetDict.save_to_disk
KINDS = ".json/.jsonl/.csv/.parquet/.txt"
SHOWN_NAMES = 3  # file names listed in a notice


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
    caller to confine: all files of a saved dataset, else the data files in the folder and one
    level down (not hidden), which include every file ``plan_folder`` picks."""
    if is_saved_dataset(folder):
        return sorted(path for path in folder.rglob("*") if path.is_file())
    return _listing(folder)


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
        raise DatasetError(f"folder {folder.name} has no {KINDS} data files: put data files in it (or one level "
                           "down, e.g. data/train.jsonl), or give the path of a data file")
    splits = _splits(folder, set(listed))
    if "train" not in splits:
        raise DatasetError(f"folder {folder.name} has no training files, only the split(s) {sorted(splits)}: name "
                           "training files train* (e.g. train.jsonl), or give the files themselves")
    plan = FolderPlan(folder)
    chosen = splits.pop("train")
    for split, files in sorted(splits.items()):
        plan.notices.append(f"folder {folder.name}: its {split} files ({_names(folder, files)}) are not read for "
                            "training; give them as evaluation data if they are")
    unsplit = [path for path in listed if path not in chosen and not any(path in files for files in splits.values())]
    if unsplit:
        plan.notices.append(f"folder {folder.name}: {_names(folder, unsplit)} left out: their names say no split "
                            "while other files are named train*")
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
    """Why a JSON file holds no rows ('' when it may: syntax errors are reported when it is read)."""
    ext = split_suffix(path)[0]
    if ext != ".json":
        return ""
    try:
        start = read_text(path).lstrip()
    except Exception:  # noqa: BLE001 - unreadable: the reader names the problem
        return ""
    if start.startswith("[") or not start:
        return ""
    if start.startswith("{"):
        return "" if looks_like_lines(start) else "it holds one JSON object, not rows"
    return "it holds a single JSON value, not rows"


def _one_kind(folder: Path, files: list[Path]) -> None:
    """DatasetError when ``files`` are of more than one kind (JSON, CSV, Parquet, text)."""
    kinds: dict[str, Path] = {}
    for path in files:
        kinds.setdefault(BUILDERS[split_suffix(path)[0]], path)
    if len(kinds) > 1:
        examples = ", ".join(f"{path.relative_to(folder)} ({data_suffix(path)})" for path in kinds.values())
        raise DatasetError(f"folder {folder.name} mixes kinds of data files: {examples}; keep one kind of file "
                           "(one layout) in the folder, or give the files one by one")


def _names(folder: Path, files: list[Path]) -> str:
    """Up to SHOWN_NAMES relative names and a count of the rest."""
    names = [str(path.relative_to(folder)) for path in files[:SHOWN_NAMES]]
    more = len(files) - SHOWN_NAMES
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def load_saved(folder: Path) -> datasets.Dataset:
    """The rows of a ``save_to_disk`` folder (``datasets.load_from_disk``, in memory): a Dataset, or
    the ``train`` split of a DatasetDict. Raises DatasetError when it cannot be loaded or a
    DatasetDict has no ``train`` split (naming the splits it has)."""
    try:
        loaded = datasets.load_from_disk(str(folder), keep_in_memory=True)
    except Exception as exc:  # noqa: BLE001 - datasets raises several kinds for a damaged folder
        raise DatasetError(f"folder {folder.name} looks written by save_to_disk but cannot be loaded ({exc}): "
                           "save it again with Dataset.save_to_disk") from exc
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise DatasetError(f"folder {folder.name} holds the splits {sorted(loaded)} but no 'train' split: save "
                               "the training rows as 'train', or give the split's folder (e.g. "
                               f"{folder.name}/{sorted(loaded)[0]})")
        loaded = loaded["train"]
    return loaded
