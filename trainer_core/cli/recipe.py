"""``python -m trainer_core recipe run RECIPE.yaml [--preview N] [--api-key-env NAME]``, ``recipe
templates`` and ``recipe show TEMPLATE``: make a dataset from documents, seed rows or topics with a
writer model (``trainer_core.recipes``).

A run writes ``DATA_DIR/recipes/<name>-<time>/`` (``data.jsonl`` and its data card, see
``recipes.output``) and prints its report as JSON on stdout; progress goes to stderr. ``--preview
N`` makes the first N records, prints each (its row, or the gate that dropped it) and the full
run's records, seconds and tokens scaled from them, and writes nothing. The key comes from the
environment variable the recipe names (``model.api_key_env``) or ``--api-key-env``; it is never
printed. Ctrl-C stops: the records made so far are written. Exit
codes: 0 made, 1 the writer model failed, 2 bad input, 130 stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Optional

from pydantic import SecretStr

from trainer_core.recipes.errors import MODEL_UNREACHABLE, RecipeError
from trainer_core.recipes.library import template_names, template_text
from trainer_core.recipes.schema import read_recipe
from trainer_core.settings import get_settings


def add_parser(sub: Any) -> None:
    """Register the ``recipe`` sub-command and its actions on ``sub`` (argparse sub-parsers)."""
    recipe = sub.add_parser("recipe", help="Make a training set from documents, seed rows or topics with a model.")
    actions = recipe.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="Run a recipe file.")
    run.add_argument("file", type=Path, metavar="RECIPE.yaml")
    run.add_argument(
        "--preview", type=int, default=0, metavar="N", help="Make the first N records, print them, write nothing."
    )
    run.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="Environment variable holding the endpoint's key (overrides the recipe's).",
    )
    actions.add_parser("templates", help="List the built-in recipes.")
    show = actions.add_parser("show", help="Print a built-in recipe's YAML (save it, edit it, run it).")
    show.add_argument("template", choices=template_names())


def _key(name: Optional[str]) -> Optional[SecretStr]:
    """The key in environment variable ``name`` (None: no key). Raises RecipeError when it is unset."""
    if not name:
        return None
    value = os.environ.get(name)
    if not value:
        raise RecipeError(f"model.api_key_env: the environment variable {name} is not set", fields=("api_key_env",))
    return SecretStr(value)


def _progress(done: int, total: int, dropped: dict[str, int]) -> None:
    why = ", ".join(f"{reason} {count}" for reason, count in dropped.items()) or "none"
    print(f"[{done:>5}/{total}] records made; dropped: {why}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    # here, not at the top: the writer's client (openai) is no part of the other commands' start
    from trainer_core.recipes.output import summary, write_result
    from trainer_core.recipes.run import full_run_estimate, run_recipe

    settings = get_settings()
    recipe = read_recipe(args.file)
    key = _key(args.api_key_env or recipe.model.api_key_env)
    stop, outcome = threading.Event(), {}

    def work() -> None:
        try:
            outcome["result"] = run_recipe(recipe, settings, key, preview=args.preview, progress=_progress, stop=stop)
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=work, name="recipe-run", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:
        print("stopping: finishing the requests in flight, keeping what was made", file=sys.stderr, flush=True)
        stop.set()
        thread.join()
    if "error" in outcome:
        raise outcome["error"]
    result = outcome["result"]  # a recipes.run.RecipeResult
    if args.preview:
        for record in sorted([*result.kept, *result.dropped], key=lambda r: r.index):
            shown = (
                {"record": record.index, "row": record.output}
                if record.output and not record.reason
                else {"record": record.index, "dropped": record.reason, "why": record.detail}
            )
            print(json.dumps(shown, ensure_ascii=False))
        print(json.dumps({"preview": summary(recipe, result), "full_run_estimate": full_run_estimate(recipe, result)}))
    else:
        folder = write_result(recipe, result, settings)
        print(json.dumps({"folder": str(folder), **summary(recipe, result)}))
    return 130 if result.stopped else 0


def run(args: argparse.Namespace) -> int:
    """Run the ``recipe`` action; returns the exit code."""
    if args.action == "templates":
        print("\n".join(template_names()))
        return 0
    if args.action == "show":
        print(template_text(args.template), end="")
        return 0
    try:
        return _run(args)
    except RecipeError as exc:
        print(f"error [{exc.code}]: {exc}", file=sys.stderr)
        return 1 if exc.code == MODEL_UNREACHABLE else 2
