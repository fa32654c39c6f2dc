"""``python -m trainer_core recipe run RECIPE.yaml [--preview N] [--api-key-env NAME] [--resume
FOLDER] [--push-to OWNER/NAME [--public]]``, ``recipe templates`` and ``recipe show TEMPLATE``: make
a dataset from documents, seed rows or topics with a writer model (``trainer_core.recipes``).

A run writes ``DATA_DIR/recipes/<name>-<time>/`` (``data.jsonl`` and its data card, see
``recipes.output``; each record is appended as it is made, ``recipes.journal``) and prints its
report as JSON on stdout; progress goes to stderr. ``--resume FOLDER`` continues a stopped or
failed run in its folder (its name in ``DATA_DIR/recipes``), skipping the records it made; the
recipe must be the folder's but for ``model``. ``--push-to`` pushes the result folder to the Hub as
a dataset repo (private unless ``--public``; the token from ``HF_TOKEN``). ``--preview N`` makes the
first N records, prints each (its row, or the gate that dropped it) and the full run's records,
seconds and tokens scaled from them, and writes nothing. The key comes from the environment
variable the recipe names (``model.api_key_env``) or ``--api-key-env``; it is never printed. Ctrl-C
stops: the records made so far are written. Exit codes: 0 made, 1 the writer model or the push
failed, 2 bad input, 130 stopped.
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

from trainer_core.export.hub_push import HubPushError, repo_id_problem
from trainer_core.paths import PathNotAllowed
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
    run.add_argument(
        "--resume", metavar="FOLDER", help="Continue the stopped or failed run in this result folder (its name)."
    )
    run.add_argument("--push-to", metavar="OWNER/NAME", help="Push the result to this Hub dataset repo (HF_TOKEN).")
    run.add_argument("--public", action="store_true", help="With --push-to: create the dataset repo as public.")
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
    # the recipe runner (the openai client) only when a recipe runs: not for every CLI command
    from trainer_core.recipes.hub_push import push_result
    from trainer_core.recipes.output import result_folder
    from trainer_core.recipes.preview import preview_report, shown_records
    from trainer_core.recipes.run import RecipeResult, run_recipe
    from trainer_core.recipes.task import folder_in_recipes, same_recipe
    from trainer_core.recipes.task_worker import make_into

    settings = get_settings()
    recipe = read_recipe(args.file)
    key = _key(args.api_key_env or recipe.model.api_key_env)
    if args.preview and (args.resume or args.push_to):
        raise RecipeError("--preview writes nothing: it takes no --resume or --push-to", fields=("preview",))
    if args.push_to and (problem := repo_id_problem(args.push_to)):
        raise RecipeError(f"--push-to: {problem}", fields=("push_to",))
    folder = folder_in_recipes(settings, args.resume) if args.resume else result_folder(recipe, settings)
    if args.resume:
        same_recipe(recipe, folder)
    stop, outcome = threading.Event(), {}

    def work() -> None:
        try:
            if args.preview:
                outcome["result"] = run_recipe(
                    recipe, settings, key, preview=args.preview, progress=_progress, stop=stop
                )
            else:
                outcome["report"] = make_into(recipe, key, settings, folder, stop, _progress)
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
    if args.preview:
        result: RecipeResult = outcome["result"]
        for shown in shown_records(result):
            print(json.dumps(shown, ensure_ascii=False))
        print(json.dumps(preview_report(recipe, result)))
        return 130 if result.stopped else 0
    report = {"folder": str(folder), **outcome["report"]}
    code = 130 if report["stopped"] else 0
    if args.push_to and not report["stopped"]:
        try:
            report["pushed"] = push_result({"repo_id": args.push_to, "private": not args.public}, folder)
        except HubPushError as exc:
            print(f"error [hub_push_failed]: {exc} (the dataset is kept in {folder})", file=sys.stderr)
            code = 1
    print(json.dumps(report))
    return code


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
    except (RecipeError, PathNotAllowed) as exc:
        print(f"error [{exc.code}]: {exc}", file=sys.stderr)
        return 1 if exc.code == MODEL_UNREACHABLE else 2
