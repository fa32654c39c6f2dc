"""``python -m trainer_core import-runs [FOLDER ...] [--json]``: rebuild the run history from run
folders (``runs.reimport``), after a damaged ``studio.db`` was moved aside.

Without FOLDER the studio's runs folder is read. A FOLDER is a run folder (holding ``run.json``) or a
folder of them, and must lie in the runs folder or an allowed folder (the same path check as every
other door). Runs already in the history are left as they are. Exit codes: 0 done, 1 the history
cannot be read, 2 a folder refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    """Register the ``import-runs`` sub-command on ``sub`` (argparse sub-parsers)."""
    cmd = sub.add_parser(
        "import-runs",
        help="Rebuild the run history from run folders (their run.json and metrics.jsonl).",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    cmd.add_argument("folders", metavar="FOLDER", nargs="*", help="A run folder or a folder of run folders.")
    cmd.add_argument("--json", action="store_true", help="Print the result as one JSON object.")


def run(args: argparse.Namespace) -> int:
    """Import, print the summary; the exit code (0, 1 unreadable history, 2 refused folder)."""
    from trainer_core.paths import PathNotAllowed, confine
    from trainer_core.runs.integrity import HistoryUnreadable
    from trainer_core.runs.reimport import ImportReport, import_run, import_runs
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import get_settings
    from trainer_core.training.manifest import RUN_JSON

    settings = get_settings()
    roots = [settings.runs_dir, *settings.allowed_roots]
    try:
        folders = [confine(f, roots, "FOLDER") for f in args.folders] or [settings.runs_dir]
    except PathNotAllowed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        store = RunStore(settings.db_path)
    except HistoryUnreadable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report = ImportReport()
    try:
        for folder in folders:
            if (folder / RUN_JSON).exists():
                import_run(store, folder, report)
            else:
                found = import_runs(store, folder)
                report.imported += found.imported
                report.known += found.known
                report.skipped += found.skipped
                report.bad_lines += found.bad_lines
    finally:
        store.close()
    if args.json:
        print(json.dumps({**vars(report), "history": str(Path(settings.db_path))}))
    else:
        print(f"{settings.db_path}: {report.summary()}")
    return 0
