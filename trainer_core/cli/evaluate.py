"""``python -m trainer_core evaluate RUN [--dataset FILE ...] [--max-rows N] [--max-new-tokens N]
[--batch-size N] [--no-base] [--output DIR] [--json]``: score a run folder, ``RUN_FOLDER/checkpoint-N``
or ``base`` on held-out rows in the terminal.

Without ``--dataset`` the run's own evaluation data is used (its eval files, Hub eval split or
val_size split). It runs in this process with the same code as the app's evaluation task
(``evaluation.worker.evaluate``), shows a progress bar on stderr (Ctrl-C cancels and leaves
nothing), writes ``predictions.jsonl`` and ``scores.json`` into ``--output`` (default: a new
``RUN_FOLDER/evaluations/<id>``, or ``<data dir>/evaluations/<id>`` for base) and prints the scores
(``--json``: the result as one JSON object, with ``predictions_path``) as one table, metric | base |
tuned | change (an embedding run: its retrieval metrics, ``kinds.embedding.evaluation``). Exit codes: 0 done, 1 the
model could not be loaded or the evaluation failed, 2 bad input, 130 cancelled.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from trainer_core.evaluation.schemas import EvaluateRequest
from trainer_core.refusals import explain
from trainer_core.request.model import DEFAULT_MODEL

FIELDS = EvaluateRequest.model_fields


def add_parser(sub: Any) -> None:
    """Register the ``evaluate`` sub-command on ``sub`` (argparse sub-parsers)."""
    ev = sub.add_parser(
        "evaluate",
        help="Score a run, one of its checkpoints or the base model on held-out rows (a text model: loss and "
        "answers; an embedding model: nDCG@10, MRR@10, recall@1/@10, Spearman), beside its base.",
    )
    ev.add_argument("run", metavar="RUN", help="A run's output folder, RUN_FOLDER/checkpoint-N, or 'base'.")
    ev.add_argument("--dataset", action="append", default=[], help=FIELDS["datasets"].description + " Repeatable.")
    for name in ("max_rows", "max_new_tokens", "batch_size"):
        info = FIELDS[name]
        ev.add_argument(
            "--" + name.replace("_", "-"),
            type=int,
            default=None,
            help=(info.description + (f" (default: {info.default})" if info.default is not None else "")).replace(
                "%", "%%"
            ),
        )
    ev.add_argument("--no-base", action="store_true", help="Do not answer with the base model too (faster).")
    ev.add_argument("--base-model", default=DEFAULT_MODEL, help=f"With RUN=base: the model (default: {DEFAULT_MODEL}).")
    ev.add_argument("--output", type=Path, help="A new or empty folder for predictions.jsonl and scores.json.")
    ev.add_argument("--json", action="store_true", help="Print the result as one JSON object.")


def _request(args: argparse.Namespace, model_id: str) -> EvaluateRequest:
    values = {
        name: getattr(args, name)
        for name in ("max_rows", "max_new_tokens", "batch_size")
        if getattr(args, name) is not None
    }
    return EvaluateRequest(
        model=model_id, datasets=[str(Path(p).resolve()) for p in args.dataset], compare_base=not args.no_base, **values
    )


def output_folder(choice: Any, given: Optional[Path]) -> Path:
    """``given`` (must be new or empty), else a new ``<run folder>/evaluations/<id>`` (base:
    ``<data dir>/evaluations/<id>``). Raises ValueError for a folder that holds files."""
    from trainer_core.evaluation.sources import run_folder
    from trainer_core.settings import get_settings

    if given is not None:
        folder = given.expanduser().resolve()
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise ValueError(f"--output: {folder} is not an empty folder; give a new or empty one")
    else:
        parent = run_folder(choice) or get_settings().data_dir
        folder = parent / "evaluations" / f"evaluate-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _print_scores(result: Any, path: Path) -> None:
    from trainer_core.evaluation.report import TABLE_HEAD, score_table

    print(
        f"{result.rows_evaluated} of {result.rows_available} rows of {result.source} on {result.device} "
        f"in {result.seconds:.1f} s"
    )
    table = [TABLE_HEAD, *score_table(result.tuned, result.base)]
    width = max(len(label) for label, *_ in table) + 2  # the longest metric label ("Quiet when it should not")
    for label, *values in table:
        print(f"{label:<{width}}" + "".join(f"{value:>12}" for value in values))
    for note in result.notes:
        print(f"note: {note}")
    print(f"predictions: {path}")


def _record(folder: Path) -> None:
    """Add the new files to the owning run's file list, so deleting the run removes them."""
    from trainer_core.runs.folders import read_marker, record_files

    for parent in folder.parents:
        marker = read_marker(parent)
        if marker is not None:
            record_files(parent, marker["job_id"])
            return


def _evaluate(request: EvaluateRequest, context: dict, stop: threading.Event) -> Any:
    from tqdm import tqdm

    from trainer_core.evaluation.worker import evaluate

    with tqdm(total=1000, file=sys.stderr, bar_format="{l_bar}{bar}| {elapsed} {postfix}") as bar:

        def show(fraction: float, message: str) -> None:
            bar.n = int(fraction * 1000)
            bar.set_postfix_str(message, refresh=True)

        return evaluate(request.model_dump(mode="json"), context, show, stop.is_set)


def run(args: argparse.Namespace) -> int:
    """The ``evaluate`` command; returns the exit code."""
    import datasets

    from trainer_core.cli.chat import choice_for
    from trainer_core.data.files import DatasetError
    from trainer_core.evaluation.sources import EvalDataError, plan_data
    from trainer_core.evaluation.worker import failure
    from trainer_core.serving.errors import ChatInputError
    from trainer_core.serving.worker import quiet_libraries
    from trainer_core.settings import get_settings

    datasets.disable_progress_bars()  # the one progress bar is the evaluation's
    try:
        choice = choice_for(args.run, args.base_model)
        request = _request(args, choice.id)
        plan = plan_data(choice, list(request.datasets), None)
        folder = output_folder(choice, args.output)
    except ValidationError as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)
        return 2
    except (ChatInputError, EvalDataError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    quiet_libraries()
    context = {
        "choice": choice.model_dump(),
        "models_dir": str(get_settings().models_dir),
        "output_dir": str(folder),
        "data": plan,
    }
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        result = _evaluate(request, context, stop)
    except BaseException as exc:  # noqa: BLE001 - reported, and the folder removed
        shutil.rmtree(folder, ignore_errors=True)
        print(f"error: {failure(exc)[0]}", file=sys.stderr)
        return 2 if isinstance(exc, (DatasetError, ChatInputError)) else 1  # bad data; else load or run failure
    finally:
        signal.signal(signal.SIGINT, previous)
    if result is None:
        shutil.rmtree(folder, ignore_errors=True)
        print("cancelled; nothing was kept", file=sys.stderr)
        return 130
    _record(folder)
    path = folder / result.predictions_file
    if args.json:
        print(json.dumps({**result.model_dump(mode="json"), "predictions_path": str(path)}))
    else:
        _print_scores(result, path)
    return 0
