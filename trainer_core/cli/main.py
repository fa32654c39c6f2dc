"""``python -m trainer_core`` (and the ``finetune-studio-cli`` command): the headless face.

Sub-commands, one module each: ``train`` (``cli.train``), ``check`` (``cli.check``), ``chat``
(``cli.chat``), ``evaluate`` (``cli.evaluate``), ``export`` (``cli.export``), ``import-runs``
(``cli.import_runs``) and ``recipe`` (``cli.recipe``). Their flags are
built from the engine's pydantic models (``TrainingStartRequest``, ``GenerationSettings``,
``EvaluateRequest``, ``ExportRequest``), as the page's form and the API are.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from trainer_core.cli import chat, check, evaluate, export, import_runs, recipe, train

COMMANDS = {
    "train": train.run,
    "check": check.run,
    "chat": chat.run,
    "evaluate": evaluate.run,
    "export": export.run,
    "import-runs": import_runs.run,
    "recipe": recipe.run,
}


def program_name() -> str:
    """How the user started us: ``python -m trainer_core``, or the installed ``finetune-studio-cli``."""
    started_as = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "python -m trainer_core" if started_as in ("", "__main__.py", "-c") else started_as


def build_parser() -> argparse.ArgumentParser:
    """The parser of every sub-command (``train`` and ``check`` share the request's flags)."""
    parser = argparse.ArgumentParser(prog=program_name(), description="Finetune Studio, headless")
    sub = parser.add_subparsers(dest="command", required=True)
    train_parser = train.add_parser(sub)
    check.add_parser(sub, train_parser)  # the same flags as train, plus --json
    chat.add_parser(sub)
    evaluate.add_parser(sub)
    export.add_parser(sub)
    import_runs.add_parser(sub)
    recipe.add_parser(sub)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point; returns the process exit code (0 success, 1 failure, 2 bad input, 130 cancelled)."""
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command](args)
