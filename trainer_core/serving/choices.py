"""What can be talked to: the base model, each finished run's final weights, each complete checkpoint.

Ids: ``base``; a job id (the run's final weights, in its output folder); ``JOB_ID/checkpoint-N``.
``base`` is the base model of the newest run that has weights to talk to (the model the user is
most likely comparing against), or the default model when there is none; it serves what its own
folder serves where it is on this machine, not what that run trained it as. Run folders come from the
run history and are confined to the allowed folders (``paths.confine``), like every path a
user can name. A LoRA / QLoRA folder holds an adapter (``adapter_model.safetensors``) on the base
named by its ``adapter_config.json``; a full fine-tune holds a whole model (``model*.safetensors``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

from trainer_core.data.preview_tokenizer import local_model_folder
from trainer_core.model_kind import kind_for_folder
from trainer_core.models.hub import looks_like_path
from trainer_core.paths import PathNotAllowed, confine
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.runs.store import RunRecord, RunStore
from trainer_core.serving.errors import ChatInputError, UnknownModel
from trainer_core.serving.schemas import BASE_MODEL_ID, ModelChoice
from trainer_core.settings import Settings
from trainer_core.training.checkpoints import CHECKPOINT
from trainer_core.vocabulary import LIVE_PHASES, Phase

log = logging.getLogger(__name__)
ADAPTER_FILE = "adapter_model.safetensors"
FINAL_PHASES = (Phase.completed, Phase.stopped, Phase.interrupted)  # runs whose folder may hold final weights


def has_weights(folder: Path) -> Optional[bool]:
    """True: ``folder`` holds a PEFT adapter; False: a whole model; None: no weights."""
    if (folder / ADAPTER_FILE).is_file():
        return True
    if (folder / "config.json").is_file() and any(folder.glob("model*.safetensors")):
        return False
    return None


def adapter_base(folder: Path) -> Optional[str]:
    """``base_model_name_or_path`` from the folder's ``adapter_config.json`` (None if unreadable)."""
    try:
        value = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def model_key(name: str, models_dir: Optional[Path] = None) -> str:
    """A comparable identity of a model reference: a Hub id, a Hub cache snapshot of it
    (``.../models--owner--name/snapshots/REV``) and the studio's materialized copy of the default
    model all give the lower-cased Hub id; any other folder gives its resolved path."""
    if not looks_like_path(name):
        return name.lower()
    path = Path(name).expanduser().resolve()
    for part in path.parts:
        if part.startswith("models--"):
            return part.removeprefix("models--").replace("--", "/").lower()
    if path.name == DEFAULT_MODEL.split("/")[-1] and (models_dir is None or path.parent == Path(models_dir).resolve()):
        return DEFAULT_MODEL.lower()
    return str(path)


def short_name(name: str) -> str:
    """The last part of a Hub id or folder path, for labels."""
    return name.rstrip("/").split("/")[-1] or name


def weights_choice(
    folder: Path,
    kind: str,
    model_id: str,
    run_model: Optional[str],
    models_dir: Optional[Path] = None,
    job_id: Optional[str] = None,
) -> ModelChoice:
    """The choice for a weights folder (run final or checkpoint). ``run_model`` is the run's
    ``model_name`` (its base). Raises ChatInputError when the folder holds no weights or holds an
    adapter trained on another base than ``run_model``."""
    adapter = has_weights(folder)
    if adapter is None:
        raise ChatInputError(f"{model_id} has no model weights (no {ADAPTER_FILE} or model.safetensors in {folder})")
    base = run_model
    if adapter:
        trained_on = adapter_base(folder)
        if trained_on and run_model and model_key(trained_on, models_dir) != model_key(run_model, models_dir):
            raise ChatInputError(
                f"{model_id}: its adapter was trained on {trained_on}, not on the run's base model "
                f"{run_model}; it cannot be loaded on that base"
            )
        base = run_model or trained_on
    return ModelChoice(
        id=model_id,
        label=model_id,
        kind=kind,
        base_model=base or DEFAULT_MODEL,
        path=str(folder),
        job_id=job_id,
        adapter=adapter,
        created_at=folder.stat().st_mtime,
        serves=kind_for_folder(folder).serves,  # an embedding run's folder holds its modules.json, adapter or not
    )


def _losses(store: RunStore, job_id: str) -> dict[int, float]:
    """Training loss logged at each step of the run (the last one logged at a step wins)."""
    run = store.get_run(job_id)
    return {m.step: m.loss for m in (run.metrics if run else []) if m.loss is not None}


def _label(choice: ModelChoice, model: str) -> str:
    loss = f", loss {choice.loss:.3f}" if choice.loss is not None else ""
    step = f"step {choice.step}" if choice.step is not None else "no steps"
    what = "final" if choice.kind == "final" else choice.id.split("/")[-1]
    return f"{choice.job_id} · {what} ({short_name(model)}, {step}{loss})"


def _run_folder(run: RunRecord, settings: Settings) -> Path:
    """The run's output folder, confined and present; ChatInputError otherwise."""
    try:
        folder = confine(run.output_dir, settings.allowed_roots, "run folder")
    except PathNotAllowed as exc:
        raise ChatInputError(f"run {run.job_id}: {exc}") from None
    if not folder.is_dir():
        raise ChatInputError(f"run {run.job_id}: its folder {folder} no longer exists (deleted); choose another run")
    return folder


def _confined_base(choice: ModelChoice, settings: Settings) -> ModelChoice:
    """A base model given as a folder must lie in the model folders a Start accepts
    (``settings.model_roots``), as training's ``model_name`` must; ChatInputError otherwise."""
    if looks_like_path(choice.base_model):
        try:
            choice.base_model = str(confine(choice.base_model, settings.model_roots, "base model"))
        except PathNotAllowed as exc:
            raise ChatInputError(f"{choice.id}: {exc}") from None
    return choice


def _final(run: RunRecord, folder: Path, settings: Settings) -> ModelChoice:
    if run.phase in LIVE_PHASES:
        raise ChatInputError(f"run {run.job_id} is still training; talk to it when it has finished")
    if run.phase not in FINAL_PHASES or has_weights(folder) is None:
        checkpoints = _checkpoint_folders(folder)
        if not checkpoints:
            raise ChatInputError(
                f"run {run.job_id} ({run.phase.value}) has no weights to talk to: it ended before "
                "its first save; train it again (save_steps sets how often checkpoints are saved)"
            )
        raise ChatInputError(
            f"run {run.job_id} ({run.phase.value}) saved no final weights; choose one of its "
            f"checkpoints (newest: {run.job_id}/{checkpoints[0][1].name})"
        )
    model = run.request.get("model_name") or DEFAULT_MODEL
    choice = weights_choice(folder, "final", run.job_id, model, settings.models_dir, run.job_id)
    choice.step, choice.loss, choice.query_prompt = run.last_step, run.final_loss, run.request.get("query_prompt")
    choice.label = _label(choice, model)
    return _confined_base(choice, settings)


def _checkpoint_folders(folder: Path) -> list[tuple[int, Path]]:
    """(step, folder) of the complete checkpoints (trainer state written), highest step first."""
    found = [
        (int(m.group(1)), p)
        for p in folder.glob("checkpoint-*")
        if (m := CHECKPOINT.match(p.name)) and (p / "trainer_state.json").is_file()
    ]
    return sorted(found, reverse=True)


def _checkpoint(run: RunRecord, folder: Path, step: int, losses: dict[int, float], settings: Settings) -> ModelChoice:
    model = run.request.get("model_name") or DEFAULT_MODEL
    choice = weights_choice(folder, "checkpoint", f"{run.job_id}/{folder.name}", model, settings.models_dir, run.job_id)
    choice.step, choice.loss, choice.query_prompt = step, losses.get(step), run.request.get("query_prompt")
    choice.label = _label(choice, model)
    return _confined_base(choice, settings)


def base_choice(model: str, serves: str = "chat") -> ModelChoice:
    """The ``base`` entry for base model ``model``, serving ``serves`` (what the model's folder
    serves: a sentence-transformers folder embeds, a causal LM chats, whatever its newest run
    trained it as)."""
    return ModelChoice(
        id=BASE_MODEL_ID, label=f"Base model ({short_name(model)})", kind="base", base_model=model, serves=serves
    )


def list_choices(store: Optional[RunStore], settings: Settings) -> list[ModelChoice]:
    """``base``, then per run (newest first) its final weights and its checkpoints (highest step
    first). Runs that are live, deleted, outside the allowed folders or without weights are left out."""
    found: list[ModelChoice] = []
    for run in store.list_runs() if store is not None else []:
        if run.phase in LIVE_PHASES:
            continue
        try:
            folder = _run_folder(run, settings)
        except ChatInputError:
            continue
        found.extend(_run_choices(store, run, folder, settings))
    if not found:
        return [base_choice(DEFAULT_MODEL)]
    return [base_choice(found[0].base_model, _base_serves(found[0], settings)), *found]


def _base_serves(newest: ModelChoice, settings: Settings) -> str:
    """What ``base`` serves: what the base model's own folder serves where it is on this machine (a
    sentence-transformers folder embeds, a causal LM chats, whatever ``newest``, the newest run,
    trained it as), else what ``newest`` serves."""
    folder = local_model_folder(newest.base_model, settings)
    return kind_for_folder(folder).serves if folder is not None else newest.serves


def _run_choices(store: RunStore, run: RunRecord, folder: Path, settings: Settings) -> list[ModelChoice]:
    """The run's usable weights: final first, then checkpoints (highest step first)."""
    checkpoints = _checkpoint_folders(folder)
    losses = _losses(store, run.job_id) if checkpoints else {}
    makers = [
        lambda: _final(run, folder, settings),
        *(lambda s=step, p=path: _checkpoint(run, p, s, losses, settings) for step, path in checkpoints),
    ]
    choices = []
    for make in makers:
        try:
            choices.append(make())
        except ChatInputError as exc:
            log.debug("not listed: %s", exc)
    return choices


def resolve_choice(model_id: str, store: Optional[RunStore], settings: Settings) -> ModelChoice:
    """The choice with id ``model_id``. Raises UnknownModel (no such id) or ChatInputError (the run
    is live, its folder is deleted or outside the allowed folders, it has no such weights, or a
    checkpoint's adapter was trained on another base)."""
    model_id = (model_id or "").strip()
    if model_id == BASE_MODEL_ID:
        return list_choices(store, settings)[0]
    job_id, _, sub = model_id.partition("/")
    run = store.get_run(job_id) if store is not None and job_id else None
    if run is None:
        raise UnknownModel(
            f"model {model_id[:120]!r}: no such model; use 'base', a run's job id, JOB_ID/checkpoint-N, or an "
            "export's EXPORT_TASK_ID (merged) or EXPORT_TASK_ID/TYPE (GGUF), as GET /v1/models lists",
            fields=("model",),
        )
    if sub and not (m := CHECKPOINT.match(sub)):
        raise UnknownModel(
            f"model {model_id[:120]!r}: {sub[:80]!r} is not a checkpoint name (checkpoint-N)", fields=("model",)
        )
    folder = _run_folder(run, settings)
    if not sub:
        return _final(run, folder, settings)
    if run.phase in LIVE_PHASES:
        raise ChatInputError(f"run {run.job_id} is still training; talk to its checkpoints when it has finished")
    checkpoint = folder / sub
    if not (checkpoint / "trainer_state.json").is_file():
        raise ChatInputError(
            f"model {model_id[:120]!r}: run {job_id} has no complete {sub} (deleted, or never saved)", fields=("model",)
        )
    return _checkpoint(run, checkpoint, int(m.group(1)), _losses(store, job_id), settings)
