"""``python -m trainer_core export RUN --format adapter|merged|gguf-TYPE [--gguf-types TYPE ...]
[--dtype float16] [--output DIR] [--push-to-hub OWNER/NAME [--public]]``: export a run folder or ``RUN_FOLDER/checkpoint-N``.

Runs in this process with the same export code as the app's export task; progress goes to stderr,
the check result and the files to stdout. Without ``--output`` the files go to
``RUN_FOLDER/exports/<export id>`` as the app's do. ``--push-to-hub`` pushes a passed export with
the token in ``HF_TOKEN`` (private unless ``--public``). A failed export leaves nothing behind; an
export whose check failed keeps its files. Exit codes: 0 exported and checked, 1 the check failed or
the export / push failed, 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional, get_args

from pydantic import ValidationError

from trainer_core.export.schemas import EXPORT_FORMATS, GGUF_TYPES, ExportRequest, ExportResult, MergeDtype


def add_parser(sub: Any) -> None:
    """Register the ``export`` sub-command on ``sub`` (argparse sub-parsers)."""
    fields = ExportRequest.model_fields
    export = sub.add_parser("export", help="Export a run as an adapter zip, a merged model or a GGUF file, checked.")
    export.add_argument("run", metavar="RUN", help="A run's output folder or RUN_FOLDER/checkpoint-N.")
    export.add_argument(
        "--format", choices=EXPORT_FORMATS, default=fields["format"].default, help=fields["format"].description
    )
    export.add_argument(
        "--gguf-types",
        nargs="+",
        choices=GGUF_TYPES,
        default=[],
        metavar="TYPE",
        help=f"{fields['gguf_types'].description} One or more of: {', '.join(GGUF_TYPES)}.",
    )
    export.add_argument(
        "--dtype", choices=get_args(MergeDtype), default=fields["dtype"].default, help=fields["dtype"].description
    )
    export.add_argument(
        "--output", type=Path, help="Folder to write into (new or empty; default RUN_FOLDER/exports/<id>)."
    )
    export.add_argument(
        "--push-to-hub", metavar="OWNER/NAME", help="Push the passed export to this Hub repo (token: HF_TOKEN)."
    )
    export.add_argument(
        "--public", action="store_true", help="With --push-to-hub: create the repo public (default private)."
    )


class _Printer:
    """Progress events -> stderr lines (``[ 45%] message``)."""

    def put(self, event: tuple) -> None:
        payload = event[1]
        print(f"[{payload.get('fraction', 0) * 100:3.0f}%] {payload.get('message', '')}", file=sys.stderr, flush=True)


def _output_dir(choice: Any, output: Optional[Path]) -> Path:
    """The folder to export into, created empty. Raises ValueError for a non-empty ``output``."""
    if output is None:
        run = Path(choice.path).parent if choice.kind == "checkpoint" else Path(choice.path)
        output = run / "exports" / f"export-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    output = output.expanduser().resolve()
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ValueError(f"--output: {output} exists and is not an empty folder")
    output.mkdir(parents=True, exist_ok=True)
    return output


def _named(choice: Any) -> Any:
    """A checkpoint's choice named ``RUN/checkpoint-N`` with its step (file names, the card)."""
    from trainer_core.training.checkpoints import CHECKPOINT

    if choice.kind != "checkpoint":
        return choice
    folder = Path(choice.path)
    return choice.model_copy(
        update={"id": f"{folder.parent.name}/{folder.name}", "step": int(CHECKPOINT.match(folder.name).group(1))}
    )


def _show(result: ExportResult, out: Path) -> None:
    checks = [(g.name, c, c is g.second_opinion) for g in result.gguf for c in (g.check, g.second_opinion) if c]
    if not checks and result.check is not None:
        checks = [("", result.check, False)]
    for name, check, second in checks:
        by = f" ({check.checked_by})" if check.checked_by else ""
        verdict = ("agrees" if check.passed else "differs") if second else ("passed" if check.passed else "FAILED")
        print(f"{name + ': ' if name else ''}{'second opinion' if second else 'check'}{by} {verdict}: {check.summary}")
        print(f"  required: {check.required}")
        for line in check.near_ties:
            print(f"  explained: {line}")
        for line in check.problems:
            print(f"  problem: {line}")
    for g in result.gguf:
        print(f"  {g.name}: {g.type}, header file type {g.file_type}, {g.size_bytes / 1e6:.1f} MB")
    print(f"{result.format} export in {out} ({result.size_bytes / 1e6:.1f} MB, {result.seconds:.1f} s):")
    for f in result.files:
        print(f"  {f.name}  {f.size_bytes / 1e6:.1f} MB")
    print("stages: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.stage_seconds.items()))


def run(args: argparse.Namespace) -> int:
    """The ``export`` command; returns the exit code."""
    from trainer_core.cli.chat import choice_for
    from trainer_core.export.start import export_refusal
    from trainer_core.export.worker import ExportError, export
    from trainer_core.refusals import explain
    from trainer_core.serving.errors import ChatInputError
    from trainer_core.serving.worker import quiet_libraries
    from trainer_core.settings import get_settings

    settings = get_settings()
    try:
        choice = _named(choice_for(args.run))
        request = ExportRequest(model=choice.id, format=args.format, dtype=args.dtype, gguf_types=args.gguf_types)
        refusal = export_refusal(
            choice, request, settings.gguf_converter_dir, settings.models_dir, settings.llama_cpp_dir
        )
        if refusal:
            raise ValueError(refusal)
        if args.push_to_hub:
            from trainer_core.export.hub_push import repo_id_problem

            if problem := repo_id_problem(args.push_to_hub):
                raise ValueError(f"--push-to-hub: {problem}")
        out = _output_dir(choice, args.output)
    except ValidationError as exc:  # one line naming the option, as every other refusal here
        print(f"error: {_flags(explain(exc))}", file=sys.stderr)
        return 2
    except (ChatInputError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    quiet_libraries()
    context = {
        "choice": choice.model_dump(),
        "models_dir": str(settings.models_dir),
        "output_dir": str(out),
        "converter_dir": str(settings.gguf_converter_dir),
        "llama_cpp_dir": str(settings.llama_cpp_dir),
    }
    try:
        result = export(request, context, _Printer(), threading.Event())
    except KeyboardInterrupt:
        shutil.rmtree(out, ignore_errors=True)
        print("cancelled; nothing was kept", file=sys.stderr)
        return 130
    except ExportError as exc:
        shutil.rmtree(out, ignore_errors=True)
        print(f"error: {exc}", file=sys.stderr)
        return 2 if exc.kind == "input" else 1
    except Exception as exc:  # noqa: BLE001 - a damaged weights file and the like: one line, nothing left
        shutil.rmtree(out, ignore_errors=True)
        print(f"error: the export failed: {type(exc).__name__}: {' '.join(str(exc).split())[:500]}", file=sys.stderr)
        return 1
    _show(result, out)
    _record(choice, request, out, result, settings)
    if not result.passed:
        print("the export's check failed: its files are kept but should not be used as they are", file=sys.stderr)
        return 1
    return _push(args, choice, out, result) if args.push_to_hub else 0


def _flags(text: str) -> str:
    """``gguf_types: ...`` -> ``--gguf-types: ...`` (the request's fields are this command's options)."""
    text = text.removeprefix("settings: ")  # a check across fields names its field itself
    for name in ExportRequest.model_fields:
        text = text.replace(f"{name}: ", f"--{name.replace('_', '-')}: ")
    return text


def _record(choice: Any, request: ExportRequest, out: Path, result: ExportResult, settings: Any) -> None:
    """Make a CLI export the app's as well, when it lies in its run's folder: its files join the
    run's list (deleting the run deletes them), and, when the run is in this data folder's history,
    it becomes an export task there (the Runs tab lists it, Chat and ``/v1`` talk to its GGUF files).
    Failures to record are reported, never fatal: the files are written."""
    from trainer_core.runs.folders import record_files
    from trainer_core.runs.store import RunStore
    from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
    from trainer_core.tasks.store import TaskStore

    run_folder = Path(choice.path).parent if choice.kind == "checkpoint" else Path(choice.path)
    job_id = run_folder.name
    try:
        if not record_files(run_folder, job_id, under=out):
            return  # not inside a run folder of the studio's: files of the user's own
        if not settings.db_path.is_file():
            return
        run = RunStore(settings.db_path).get_run(job_id)
        if run is None or Path(run.output_dir).resolve() != run_folder.resolve():
            return
        now = time.time()
        TaskStore(settings.db_path).save(
            TaskRecord(
                task_id=out.name
                if out.name.startswith("export-")
                else f"export-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}",
                kind=TaskKind.export,
                job_id=job_id,
                model=choice.id,
                phase=TaskPhase.completed if result.passed else TaskPhase.failed,
                progress=1.0,
                message="Done (exported with the CLI)" if result.passed else "Finished, but the check did not pass",
                created_at=now - result.seconds,
                finished_at=now,
                request=request.model_dump(),
                result=result.model_dump(),
                output_dir=str(out),
            )
        )
        print(f"recorded in the run history ({settings.db_path}): the app lists this export", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the export itself is done; say why it is not listed
        print(f"note: the export is not in the run history: {type(exc).__name__}: {exc}", file=sys.stderr)


def _push(args: argparse.Namespace, choice: Any, out: Path, result: ExportResult) -> int:
    from trainer_core.export.hub_push import HubPushError, push_export

    request = {"repo_id": args.push_to_hub, "private": not args.public, "token": None}
    export = {"output_dir": str(out), "result": result.model_dump(), "model": choice.id}
    try:
        pushed = push_export(request, export, say=lambda message: print(message, file=sys.stderr, flush=True))
    except HubPushError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"pushed {len(pushed.files)} files to {pushed.url} ({'private' if pushed.private else 'public'})")
    return 0
