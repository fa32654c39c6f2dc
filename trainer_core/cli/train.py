"""Headless training: ``python -m trainer_core train --dataset FILE [--config FILE.yaml] [--max-steps N] ...``
or ``train --from-run RUN/run.json`` (the settings of an earlier run, into a new folder).

Flags are generated from ``TrainingStartRequest``'s fields (``--learning-rate``, ``--lora-r``, ...),
with their help text and defaults; a run's ``run.json`` (``--from-run``), then a YAML config supply
any of the same keys, and flags win.
The request passes the same admission as a Start from the page, the API or the queue
(``admission.admit``, with every folder allowed: ``operator_settings``), then runs in the same job
runner and worker process as the app, with a progress bar.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import typing
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError
from tqdm import tqdm

from trainer_core.configs.yaml_files import read_config_file
from trainer_core.fieldmeta import FIELDS, base_type, choices, default, group
from trainer_core.refusals import Refusal, explain
from trainer_core.request.mappings import parse_mapping
from trainer_core.request.rules import training_data_missing
from trainer_core.request.sections import SECTIONS
from trainer_core.runs.job import JobRunner
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings, get_settings
from trainer_core.status import TrainingStatus
from trainer_core.training.manifest import rerun_values
from trainer_core.vocabulary import Phase

SKIP = {"local_datasets", "local_eval_datasets"}  # --dataset / --eval-dataset


def _flag_type(annotation: Any) -> Any:
    kind = base_type(annotation)
    if kind is bool:
        return "bool"
    if typing.get_origin(kind) in (list, dict):
        return "list"
    return kind if kind in (int, float) else str


def _item_choices(annotation: Any) -> Optional[list[str]]:
    """The allowed items of a list of Literal values (``report_to``); None for free items."""
    kind = base_type(annotation)
    return choices(typing.get_args(kind)[0]) if typing.get_origin(kind) is list else None


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``train`` on ``sub`` with one flag per request field (defaults left to the schema),
    grouped in ``--help`` under the form's section titles; returns its parser (``check`` takes the
    same flags)."""
    train = sub.add_parser("train", help="Fine-tune a model and save the result.")
    train.add_argument(
        "--dataset",
        action="append",
        default=[],
        help="Training file (repeat for several); optional when --from-run or --config gives local_datasets.",
    )
    train.add_argument("--eval-dataset", action="append", default=[], help="Evaluation file (repeatable).")
    train.add_argument("--config", type=Path, help="YAML file of request fields (flags override it).")
    train.add_argument(
        "--from-run",
        type=Path,
        metavar="RUN_JSON",
        help="Rerun the run this run.json records, into a new folder (--config and flags override it).",
    )
    sections = {key: train.add_argument_group(section.title) for key, section in SECTIONS.items()}
    for name, info in FIELDS.items():
        if name in SKIP:
            continue
        flag, kind, where = "--" + name.replace("_", "-"), _flag_type(info.annotation), sections[group(name)]
        help_text = f"{info.description} (default: {default(name)!s})".replace("%", "%%")
        if kind == "bool":
            where.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif kind == "list":
            pairs = "; give ours=theirs pairs" if typing.get_origin(base_type(info.annotation)) is dict else ""
            where.add_argument(
                flag, nargs="+", default=None, choices=_item_choices(info.annotation), help=help_text + pairs
            )
        else:
            where.add_argument(flag, type=kind, default=None, choices=choices(info.annotation), help=help_text)
    return train


def request_from_args(args: argparse.Namespace) -> TrainingStartRequest:
    """``--from-run`` values, then config file values, then flags, then the dataset paths -> a
    validated request. Warns on stderr for each dataset file of ``--from-run`` that is missing or
    changed. Raises ValueError (ManifestError for a bad run.json) or pydantic's ValidationError."""
    values: dict[str, Any] = {}
    if getattr(args, "from_run", None):
        values, warnings = rerun_values(args.from_run)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if args.config:
        values.update(read_config_file(args.config, keep_secrets=True)[0])
    for name in TrainingStartRequest.model_fields:
        value = getattr(args, name, None)
        if value is not None:
            values[name] = value
    for name in ("custom_format_mapping", "embedding_columns"):  # the mapping flags: name=column pairs
        if isinstance(values.get(name), list):
            values[name] = parse_mapping(",".join(values[name]), name)
    for name, given in (("local_datasets", args.dataset), ("local_eval_datasets", args.eval_dataset)):
        values[name] = [str(Path(p).resolve()) for p in (given or values.get(name) or [])]
    fix = "give --dataset FILE (or local_datasets / hf_dataset in --config or --from-run)"
    if problem := training_data_missing(values["local_datasets"], values.get("hf_dataset"), fix):
        raise Refusal(problem, fields=("local_datasets", "hf_dataset"), code="no_training_data")
    return TrainingStartRequest(**values)


def operator_settings() -> Settings:
    """The command's settings: the environment's (``Settings``), with every folder allowed and
    reward code on. The operator runs it on their own machine with their own rights, so a path
    anywhere and a ``reward_file`` are theirs (the two switches guard a server from its remote
    users); a path is still resolved and checked as the app checks it (files present, output
    folders new or empty and not the studio's, ...)."""
    settings = get_settings()
    roots = os.pathsep.join(filter(None, [settings.allowed_paths, "/"]))
    return settings.model_copy(update={"allowed_paths": roots, "allow_reward_code": True})


def checked_args(args: argparse.Namespace, preflight: bool = False) -> TrainingStartRequest | int:
    """``request_from_args`` passed through the same admission as the page, the API and the queue
    with ``operator_settings``: ``admission.admit`` for ``train`` (paths, output folders, model,
    Hub dataset, devices, reward code, the check's errors), ``checked_for_preflight`` for
    ``check`` (``preflight``). A refusal is printed as one line (its message; a missing dataset
    file in this command's words) and its exit code returned instead: 1 for what the data check
    found (``PreflightError``, ``DatasetError``: as ``check`` and a run that failed on its data
    exit), 2 for any other bad input (settings, config, run.json, a path, a device, the model)."""
    from trainer_core.admission.admit import PreflightError, admit, checked_for_preflight
    from trainer_core.admission.check_worker import checker
    from trainer_core.admission.request_paths import MissingPaths
    from trainer_core.data.errors import DatasetError

    try:
        request = request_from_args(args)
        if preflight:
            return checked_for_preflight(request, operator_settings())
        return admit(request, operator_settings(), None)
    except ValidationError as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)
    except MissingPaths as exc:
        print(f"error: dataset file not found: {', '.join(exc.paths)}", file=sys.stderr)
    except (PreflightError, DatasetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:  # any other Refusal (a ValueError), a bad config or run.json
        print(f"error: {exc}", file=sys.stderr)
    finally:
        checker().close()  # admission's check worker: its memory is the training's now
    return 2


def follow(runner: JobRunner) -> TrainingStatus:
    """Show phases and a progress bar (step, loss) until the job ends; returns the final status."""
    bar: Optional[tqdm] = None
    shown_phase, seen_step = None, 0
    while True:
        version = runner.history.version
        status = runner.status()
        if bar is None and status.phase == Phase.training:
            bar = tqdm(unit="step")  # created before the first step, so its rate is real
        for event in runner.history.events(after_step=seen_step):
            if event.loss is None or bar is None:
                continue
            bar.total = event.total_steps
            bar.update(event.step - seen_step)
            bar.set_postfix(loss=f"{event.loss:.4f}", lr=f"{event.learning_rate or 0:.2e}")
            seen_step = event.step
        if bar is not None and not status.is_training_running:
            bar.close()
        if status.phase != shown_phase:
            shown_phase = status.phase
            tqdm.write(f"[{status.phase.value}] {status.message}")
        if not status.is_training_running:
            return status
        runner.history.wait_for_change(version, 5.0)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    """Train what ``args`` asks for, following it in the terminal; the exit code (0 completed or
    stopped, 1 error, 2 bad input, 130 cancelled). Returns only once the job thread has ended, so
    the worker (or the launcher and its ranks) has exited and partial saves are cleaned before the
    interpreter's exit could end them."""
    request = checked_args(args)
    if isinstance(request, int):
        return request
    runner = JobRunner()
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` cancels like Ctrl-C: the worker goes too
    response = runner.start(request)
    if response.status == "error":
        print(f"error: {response.error or response.message}", file=sys.stderr)
        return 2
    try:
        final = follow(runner)
        runner.wait()
    except KeyboardInterrupt:
        runner.stop(save=False)
        runner.wait()
        print("cancelled", file=sys.stderr)
        return 130
    if final.error:
        print(f"error: {final.error}", file=sys.stderr)
        return 1
    print(f"{final.phase.value}: {final.message} (job {response.job_id})")
    return 0
