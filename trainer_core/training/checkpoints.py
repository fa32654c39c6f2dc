"""Checkpoint folders: the newest and the best, and how they appear whole: each is written into a
``.partial-*`` staging folder and renamed into place when complete, so a kill mid-save leaves only a
staging folder (removed by ``remove_partial_saves``), never a ``checkpoint-N`` without its trainer
state."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
PARTIAL_PREFIX = ".partial-"  # staging folders: <output_dir>/.partial-<name>/


def latest_checkpoint(output_dir: Path) -> Optional[Path]:
    """The highest-numbered complete ``checkpoint-N`` folder (one with trainer state) in ``output_dir``,
    if any; staging folders (``.partial-*``) never match."""
    found = [
        (int(m.group(1)), p)
        for p in Path(output_dir).glob("checkpoint-*")
        if (m := CHECKPOINT.match(p.name)) and (p / "trainer_state.json").is_file()
    ]
    return max(found)[1] if found else None


def best_checkpoint(output_dir: Path) -> tuple[Optional[Path], Optional[float]]:
    """The best checkpoint of a run with early stopping and its ``eval_loss``, as Trainer recorded
    them (``best_model_checkpoint``, ``best_metric``) in the newest complete checkpoint's trainer
    state; (None, None) when there is none or the folder it names is gone."""
    latest = latest_checkpoint(output_dir)
    if latest is None:
        return None, None
    try:
        state = json.loads((latest / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    best, metric = state.get("best_model_checkpoint"), state.get("best_metric")
    if not best or not Path(best).is_dir():
        return None, None
    return Path(best), float(metric) if isinstance(metric, (int, float)) else None


def staging_dir(output_dir: Path, name: str) -> Path:
    """The staging folder in which ``<output_dir>/<name>`` is written before it is published."""
    return Path(output_dir) / f"{PARTIAL_PREFIX}{name}"


def publish_folder(staged: Path, target: Path) -> None:
    """Rename the complete folder ``staged`` to ``target`` (same filesystem; atomic). A ``target``
    left by an earlier pass over the same step (a resumed run redoing it) is replaced. Raises OSError."""
    if target.exists():
        old = staged.parent / "replaced"
        os.replace(target, old)  # a kill here leaves the old copy in the staging folder, cleaned up later
        os.replace(staged, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, target)


def publish_files(staged: Path, output_dir: Path) -> None:
    """Move every entry of the complete folder ``staged`` into ``output_dir`` (each by one rename,
    replacing an older copy), then remove ``staged``. Raises OSError."""
    for entry in sorted(staged.iterdir()):
        target = Path(output_dir) / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)
    staged.rmdir()


def remove_partial_saves(output_dir: Path) -> list[str]:
    """Delete the staging folders a killed save left in ``output_dir``; returns their names. Call it
    only while no worker writes into ``output_dir``."""
    removed = []
    for path in sorted(Path(output_dir).glob(f"{PARTIAL_PREFIX}*")):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    if removed:
        log.info("removed partial saves in %s: %s", output_dir, ", ".join(removed))
    return removed
