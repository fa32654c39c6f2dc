"""Which rows an evaluation reads, decided (and checked) before any model is loaded.

Either the files the user names (each confined to the allowed folders, present and in a readable
format) or, with none named, the run's own evaluation data: its ``local_eval_datasets``, its Hub
``eval_split``, or its ``val_size`` share of the training rows, rebuilt from the run's
``request.json`` with the same files, slice and seed (``data.prepare.eval_conversations``). The
base model has no data of its own. The plan is a plain dict (it crosses into the worker process):

    {"files": [path, ...]} or {"run_request": {...TrainingStartRequest fields...}},
    plus "source" (a description for people) and "max_seq_length" (tokens, for the loss).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import datasets
from pydantic import ValidationError

from trainer_core.data.files import DatasetError
from trainer_core.data.local_kind import choice_kind
from trainer_core.data.preference import preferred_conversations
from trainer_core.data.preference_tokens import is_preference_rows
from trainer_core.data.prepare import eval_conversations, load_conversations
from trainer_core.evaluation.rows import to_rows
from trainer_core.model_kind import ModelKind, kind_named, reader_of
from trainer_core.paths import PathNotAllowed, confine
from trainer_core.refusals import Refusal, explain
from trainer_core.schemas import TrainingStartRequest
from trainer_core.serving.schemas import ModelChoice

DEFAULT_MAX_SEQ_LENGTH = TrainingStartRequest.model_fields["max_seq_length"].default
FIELD = "datasets"


class EvalDataError(Refusal):
    """Evaluation data that cannot be used; the message names the ``datasets`` field and the fix."""

    code = "eval_data_unusable"


def run_folder(choice: ModelChoice) -> Optional[Path]:
    """The run folder of a final or checkpoint choice (None for the base model)."""
    if not choice.path:
        return None
    return Path(choice.path).parent if choice.kind == "checkpoint" else Path(choice.path)


def run_request(choice: ModelChoice) -> Optional[TrainingStartRequest]:
    """The training request saved in the choice's run folder (``request.json``); None for the base
    model. Raises EvalDataError when the file is missing or no longer a valid request."""
    folder = run_folder(choice)
    if folder is None:
        return None
    try:
        saved = json.loads((folder / "request.json").read_text(encoding="utf-8"))
        return TrainingStartRequest.model_validate(saved)
    except (OSError, ValueError) as exc:
        why = explain(exc) if isinstance(exc, ValidationError) else str(exc)
        raise EvalDataError(
            f"{FIELD}: the training settings of {choice.id} cannot be read ({why}), so its own "
            "evaluation data is unknown; give held-out files in datasets",
            fields=(FIELD,),
        ) from None


def _checked_files(paths: Iterable[str], roots: Optional[list[Path]], whose: str) -> list[str]:
    """Resolved paths, each confined to ``roots`` (None: no confinement, the CLI) and present."""
    files = []
    for path in paths:
        try:
            resolved = confine(path, roots, FIELD) if roots is not None else Path(path).expanduser().resolve()
        except PathNotAllowed as exc:
            raise EvalDataError(str(exc), fields=exc.fields) from None
        if not resolved.is_file():
            raise EvalDataError(
                f"{FIELD}: {whose} file {path} was not found; give the path of an existing file (or upload it)",
                fields=(FIELD,),
            )
        files.append(str(resolved))
    return files


def read_plan(plan: dict[str, Any]) -> datasets.Dataset:
    """The planned rows in canonical form (called at the start and in the worker); a preference run's
    own rows as the conversations of its preferred answers (``preferred_conversations``). Raises
    DatasetError."""
    if "files" in plan:  # rows with images kept for a model that reads them (``vision`` in the plan)
        kind = reader_of("image") if plan.get("vision") else kind_named(None)
        return load_conversations(TrainingStartRequest(local_datasets=plan["files"]), kind=kind)[0]
    rows = eval_conversations(TrainingStartRequest.model_validate(plan["run_request"]))
    if is_preference_rows(rows.column_names):  # a DPO / ORPO / KTO run: scored on the answers it prefers
        return preferred_conversations(rows)
    return rows


def _own_data(choice: ModelChoice, roots: Optional[list[Path]]) -> dict[str, Any]:
    """The plan for the run's own evaluation data; EvalDataError when it has none."""
    request = run_request(choice)
    if request is None:
        raise EvalDataError(
            f"{FIELD}: the base model has no evaluation data of its own; give one or more held-out files in datasets",
            fields=(FIELD,),
        )
    if request.local_eval_datasets:
        request.local_eval_datasets = _checked_files(request.local_eval_datasets, roots, "the run's evaluation")
        source = f"the run's evaluation files ({', '.join(Path(p).name for p in request.local_eval_datasets)})"
    elif request.val_size > 0:
        if request.local_datasets:
            request.local_datasets = _checked_files(request.local_datasets, roots, "the run's training")
        names = ", ".join(
            [Path(p).name for p in request.local_datasets] + ([request.hf_dataset] if request.hf_dataset else [])
        )
        source = f"the run's val_size split ({request.val_size:g} of {names}, seed {request.random_seed})"
    elif request.hf_dataset and request.eval_split:
        source = f"the run's Hub split {request.hf_dataset} [{request.eval_split}]"
    else:
        raise EvalDataError(
            f"{FIELD}: {choice.id} was trained without evaluation data (no local_eval_datasets, "
            "eval_split or val_size); give held-out files in datasets",
            fields=(FIELD,),
        )
    return {"run_request": request.public_dict(), "source": source, "max_seq_length": request.max_seq_length}


def _kind_plan(
    own: Any, kind: ModelKind, choice: ModelChoice, paths: list[str], roots: Optional[list[Path]]
) -> dict[str, Any]:
    """``plan_data`` for a kind with its own evaluation: the files (or the run's own data) planned
    as for text, then completed and read by the kind (``own.plan``)."""
    if paths:
        try:
            saved = run_request(choice)
        except EvalDataError:  # the files are given: the run's settings only lend their column names
            saved = None
        files = _checked_files(paths, roots, "the")
        length = getattr(saved, "max_seq_length", DEFAULT_MAX_SEQ_LENGTH)
        plan = {"files": files, "source": ", ".join(Path(p).name for p in files), "max_seq_length": length}
    else:
        plan, saved = _own_data(choice, roots), run_request(choice)
    try:
        return {**own.plan(plan, saved), "kind": kind.name}
    except DatasetError as exc:
        raise EvalDataError(f"{FIELD}: {exc}", fields=(FIELD,)) from None


def plan_data(choice: ModelChoice, paths: list[str], roots: Optional[list[Path]]) -> dict[str, Any]:
    """The data plan for evaluating ``choice`` on ``paths`` (empty: its own evaluation data), with
    every local file confined to ``roots`` (None: not confined) and read once now, so a bad file is
    refused before the model loads (Hub data is left to the worker); the plan's ``kind`` is the
    choice's (``choice_kind``), whose own evaluation (``ModelKind.evaluation``) completes the plan
    where it has one. Raises EvalDataError."""
    kind = choice_kind(choice)
    own = kind.evaluation()
    if own is not None:
        return _kind_plan(own, kind, choice, paths, roots)
    if paths:
        files = _checked_files(paths, roots, "the")
        try:
            max_seq_length = getattr(run_request(choice), "max_seq_length", DEFAULT_MAX_SEQ_LENGTH)
        except EvalDataError:  # the files are given: the run's settings only lend their length
            max_seq_length = DEFAULT_MAX_SEQ_LENGTH
        plan = {
            "files": files,
            "source": ", ".join(Path(p).name for p in files),
            "max_seq_length": max_seq_length,
            "vision": "image" in kind.media,
        }
    else:
        plan = _own_data(choice, roots)
    if "files" in plan or not plan["run_request"].get("hf_dataset"):
        try:
            to_rows(read_plan(plan), plan["source"])
        except DatasetError as exc:
            raise EvalDataError(f"{FIELD}: {exc}", fields=(FIELD,)) from None
    return plan
