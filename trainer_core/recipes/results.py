"""The result folders in ``DATA_DIR/recipes`` with their counts, newest first (``GET
/api/recipes/results``, the page's list). A finished or stopped run's counts are its
``report.json``'s; a run that was killed or failed before writing one (or a resumed part of it
killed after the earlier part's report: ``made.jsonl`` newer than the report) is listed from the
records it appended (``journal``), ``finished`` false: resume it to finish. A folder reached through a link
out of the recipes folder is not listed (``paths.confine``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from trainer_core.paths import PathNotAllowed, confine
from trainer_core.recipes.journal import MADE_FILE, read_made
from trainer_core.recipes.output import DATA_FILE, RECIPES_FOLDER
from trainer_core.settings import Settings

COUNTED = ("records", "made", "kept", "dropped")


def _report(folder: Path) -> Optional[dict[str, Any]]:
    try:
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and all(k in report for k in COUNTED) else None


def _appended_since(folder: Path) -> bool:
    """Whether records were appended after the report was written (a resume killed mid-run)."""
    made, report = folder / MADE_FILE, folder / "report.json"
    return made.is_file() and made.stat().st_mtime_ns > report.stat().st_mtime_ns


def describe(folder: Path) -> dict[str, Any]:
    """One result folder: name, paths, format, counts, stopped, finished, modified time."""
    report = _report(folder)
    finished = report is not None and not _appended_since(folder)
    if not finished:
        made = read_made(folder)
        kept = sum(1 for r in made if r.reason is None and r.output is not None)
        total = (report or {}).get("records")
        counts: dict[str, Any] = {"records": total, "made": len(made), "kept": kept, "dropped": {}}
        for record in made:
            if record.reason:
                counts["dropped"][record.reason] = counts["dropped"].get(record.reason, 0) + 1
    elif report is not None:
        counts = {k: report[k] for k in COUNTED}
    return {
        "name": folder.name,
        "output_dir": str(folder),
        "data_file": str(folder / DATA_FILE),
        "format": (report or {}).get("format"),
        "recipe": (report or {}).get("recipe"),
        "counts": counts,
        "stopped": bool((report or {}).get("stopped", True)) or not finished,
        "finished": finished,
        "modified_at": folder.stat().st_mtime,
    }


def list_results(settings: Settings) -> list[dict[str, Any]]:
    """Every result folder in the data dir's recipes folder, newest first."""
    root = Path(settings.data_dir) / RECIPES_FOLDER
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        try:
            folder = confine(entry, [root], "result folder")
        except PathNotAllowed:
            continue
        if folder.is_dir() and (folder / "recipe.yaml").is_file():
            found.append(describe(folder))
    return sorted(found, key=lambda r: r["modified_at"], reverse=True)
