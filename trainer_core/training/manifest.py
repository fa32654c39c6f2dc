"""``run.json``: everything needed to know, and to redo, what a run did.

Keys: ``job_id``; ``request`` (``public_dict()``: no token); ``seed``; ``sft_config`` (TRL's
``SFTConfig.to_dict()``, whose ``*_token`` values transformers masks) and ``lora_config`` (PEFT's
``LoraConfig.to_dict()``; None for full fine-tuning), both made JSON-safe; ``datasets`` (see
``provenance.dataset_entries``); ``packages``; ``hardware``; ``started_at`` (the first session's
start) and ``ended_at`` (ISO 8601, UTC); ``sessions`` (one ``{"started_at",
"resume_from_checkpoint"}`` per start or resume); ``end_reason`` (an ``EndReason`` value);
``best_checkpoint``; ``final_metrics`` (see ``final_metrics``); ``system_message`` (the system
message every training row opens with, ``data.system_message.shared_system_message``; None when they differ
or have none: the exports' Modelfile ``SYSTEM``); ``tool_format`` (how the training rows' tools were
rendered, ``data.tool_rows.trained_tool_format``: "native" through the chat template's ``tools``,
"fallback" as the ``<tools>`` block with ``<tool_call>`` calls; None without tools: what serving
prompts a tuned model with).

The worker writes it when training begins (``begin_manifest``); the job thread completes it when the
job ends, however it ends (``finish_manifest``), writing a shorter one when the worker never got
that far. Every write is atomic (a temporary file renamed into place).
"""

from __future__ import annotations

import enum
import json
import logging
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Optional

from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import TrainingProgress
from trainer_core.training.provenance import dataset_entries, file_fingerprint, hardware_info, package_versions

log = logging.getLogger(__name__)
RUN_JSON = "run.json"
FORMAT_VERSION = 1
# Fields a rerun must not take over from the original run: it gets a new folder and starts fresh.
NOT_RERUN = ("output_dir", "resume_from_checkpoint")


class ManifestError(ValueError):
    """A ``run.json`` that cannot be read or is not one; the message names the file and the fix."""


def utc_now() -> str:
    """Now as ISO 8601 in UTC, to the second (``2026-12-01T19:23:16+00:00``)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def json_safe(value: Any) -> Any:
    """``value`` with sets as sorted lists, enums as their values, tuples as lists, paths and any
    other non-JSON object as ``str``; dict keys as strings."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((json_safe(v) for v in value), key=str)
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON to ``path`` via a temporary file in the same folder renamed
    over it, so readers see the old file or the new one, never half. Raises OSError."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, allow_nan=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the run's other files are readable too
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifest(path: Path) -> dict[str, Any]:
    """The ``run.json`` at ``path`` (a file, or a run folder holding one). Raises ManifestError when
    it is missing, not JSON, or has no ``request``."""
    path = Path(path)
    if path.is_dir():
        path = path / RUN_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(
            f"{path} does not exist: give the run.json of a run (it lies in the run's output folder)"
        ) from None
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than any run.json
        raise ManifestError(
            f"{path} cannot be read as JSON ({type(exc).__name__}: {str(exc)[:200]}): give the run.json a run wrote"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("request"), dict):
        raise ManifestError(f"{path} has no 'request' settings: it is not a run.json written by a run")
    return data


def _existing(output_dir: Path) -> dict[str, Any]:
    try:
        return read_manifest(Path(output_dir) / RUN_JSON)
    except ManifestError:
        return {}


def _base(output_dir: Path, request: TrainingStartRequest, job_id: str, with_rows: bool) -> dict[str, Any]:
    """The parts every ``run.json`` has; a run folder's earlier file (a resumed run) keeps its start
    time, configs and sessions."""
    old = _existing(output_dir)
    return {
        "format_version": FORMAT_VERSION,
        "job_id": job_id,
        "request": request.public_dict(),
        "seed": request.random_seed,
        "sft_config": old.get("sft_config"),
        "lora_config": old.get("lora_config"),
        "datasets": dataset_entries(request, with_rows=with_rows),
        "packages": package_versions(),
        "hardware": hardware_info(),
        "started_at": old.get("started_at"),
        "ended_at": None,
        "sessions": list(old.get("sessions") or []),
        "end_reason": None,
        "best_checkpoint": None,
        "final_metrics": None,
    }


def begin_manifest(
    output_dir: Path,
    request: TrainingStartRequest,
    job_id: str,
    sft_config: Any = None,
    lora_config: Any = None,
    structure: Optional[dict[str, Any]] = None,
    system_message: Optional[str] = None,
    tool_format: Optional[str] = None,
) -> dict[str, Any]:
    """Write ``<output_dir>/run.json`` as training begins (see the module docstring): ``sft_config``
    (a ``TrainingArguments``) and ``lora_config`` (a ``peft.LoraConfig``, or None) as resolved for
    the trainer; ``structure``: the attention implementation and the adapted modules
    (``{"attention": ..., "adapted": models.targets.adapted(model)}``). A resumed run's file is updated: new session, same ``started_at``. Returns the data
    written. Raises OSError."""
    data = _base(output_dir, request, job_id, with_rows=True)
    now = utc_now()
    data["started_at"] = data["started_at"] or now
    data["sessions"].append({"started_at": now, "resume_from_checkpoint": request.resume_from_checkpoint})
    if sft_config is not None:
        data["sft_config"] = json_safe(sft_config.to_dict())
    data["lora_config"] = json_safe(lora_config.to_dict()) if lora_config is not None else None
    if structure is not None:
        data["model_structure"] = json_safe(structure)
    data["system_message"] = system_message  # every training row's system message (data.prepare), or None
    data["tool_format"] = tool_format  # "native" / "fallback": how the rows' tools were rendered (data.tool_rows)
    write_atomic(Path(output_dir) / RUN_JSON, data)
    return data


def final_metrics(events: list[TrainingProgress]) -> dict[str, Any]:
    """Summary of a run's logged steps (train events have a ``loss``, eval events an ``eval_loss``):
    ``final_loss`` (nats per token, last train step), ``best_eval_loss`` / ``best_eval_step``,
    ``last_eval_loss``, ``steps`` (last logged step), ``total_steps``, ``tokens_seen`` and
    ``training_seconds`` (of the last train step; training time continued over resumes). Values
    are None when no such step was logged."""
    train = [e for e in events if e.loss is not None]
    evals = [e for e in events if e.eval_loss is not None]
    best = min(evals, key=lambda e: e.eval_loss) if evals else None
    last = train[-1] if train else None
    return {
        "final_loss": last.loss if last else None,
        "best_eval_loss": best.eval_loss if best else None,
        "best_eval_step": best.step if best else None,
        "last_eval_loss": evals[-1].eval_loss if evals else None,
        "steps": max((e.step for e in events), default=0),
        "total_steps": events[-1].total_steps if events else None,
        "tokens_seen": last.num_tokens if last else None,
        "training_seconds": last.elapsed_seconds if last else None,
    }


def finish_manifest(
    output_dir: Path,
    request: TrainingStartRequest,
    job_id: str,
    end_reason: str,
    events: list[TrainingProgress],
    best_checkpoint: Optional[str] = None,
    best_eval: Optional[tuple[float, Optional[int]]] = None,
) -> dict[str, Any]:
    """Complete ``<output_dir>/run.json`` when the job ends: ``ended_at``, ``end_reason``,
    ``best_checkpoint`` and ``final_metrics(events)``, whose ``best_eval_loss`` / ``best_eval_step``
    are ``best_eval`` (the best checkpoint's eval loss and step) when given. When the worker never wrote one (it failed
    or was cancelled before training began) a shorter one is written (no resolved configs; dataset
    files hashed, not read: ``rows`` and ``format`` None). Returns the data written. Raises OSError."""
    data = _existing(output_dir)
    if not data or data.get("job_id") != job_id:  # files fingerprinted but not read here, in the app's process
        data = _base(output_dir, request, job_id, with_rows=False)
        data["started_at"] = data["started_at"] or utc_now()
    metrics = final_metrics(events)
    if best_eval is not None:
        metrics.update(best_eval_loss=best_eval[0], best_eval_step=best_eval[1])
    data.update(ended_at=utc_now(), end_reason=end_reason, best_checkpoint=best_checkpoint, final_metrics=metrics)
    write_atomic(Path(output_dir) / RUN_JSON, data)
    return data


def rerun_values(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The request fields to rerun the run whose ``run.json`` is at ``path`` (without
    ``NOT_RERUN``: a rerun gets its own folder and starts from step 0), and one warning per local
    dataset file that is missing or whose SHA-256 differs from the recorded one. Raises
    ManifestError."""
    data = read_manifest(path)
    values = {k: v for k, v in data["request"].items() if k not in NOT_RERUN}
    warnings = []
    entries = data.get("datasets") or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ManifestError(f"{path}: 'datasets' is not a list of files: give the run.json a run wrote")
    for entry in entries:
        file, recorded = entry.get("path"), entry.get("sha256")
        if not isinstance(file, str) or not file:
            continue
        if not Path(file).exists():
            warnings.append(f"dataset file {file} is missing (the run used sha256 {recorded})")
        elif not Path(file).is_file():
            warnings.append(f"dataset {file} is not a regular file: its sha256 was not checked")
        elif recorded and file_fingerprint(Path(file))["sha256"] != recorded:
            warnings.append(
                f"dataset file {file} changed since the run: its sha256 differs from the recorded "
                f"{recorded}, so the rerun will not see the same data"
            )
    return values, warnings
