"""The training process: load, prepare data, train with TRL, save. Runs in a spawned child.

It talks to the job thread only through two objects: an event queue out (``(kind, payload)``
tuples, see ``EventKind``) and a stop event in (set = stop at the next step and save).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from trainer_core.distributed.env import is_main, node_rank, rank, world_size
from trainer_core.process.parent import exit_with_parent
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import EMBEDDING_EVAL_SERIES, TrainingProgress
from trainer_core.training.checkpoints import remove_partial_saves
from trainer_core.training.failure_words import redact, user_message
from trainer_core.vocabulary import Phase, TrainingMethod

log = logging.getLogger(__name__)


class EventKind:
    """Event kinds on the worker -> job thread queue; payloads are plain dicts."""

    PHASE = "phase"  # {"phase": Phase value, "message": str}
    PHASE_PROGRESS = "phase_progress"  # {"done": int, "total": int, "unit": str}: the phase's own progress
    INFO = "info"  # {"message": str, "details": dict}
    PROGRESS = "progress"  # TrainingProgress.model_dump()
    DONE = "done"  # {"phase": "completed" | "stopped", "message": str, "output_dir": str, "stop_reason"?: str}
    ERROR = "error"  # {"message": str}


def _finite(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def make_progress_callback(
    job_id: str, events: Any, stop: Any, metrics_path: Path, evaluating: str = "evaluating on the held-out rows"
) -> Any:
    """A ``transformers.TrainerCallback`` that emits a ``TrainingProgress`` per logged step (train
    and eval), appends it to ``metrics_path`` (JSON lines), and honours ``stop`` at step end. While
    the trainer evaluates (its first prediction step until ``on_evaluate``) the ``evaluating``
    detail holds ``evaluating`` (the kind's words, ``ModelKind.evaluating``), else None."""
    from transformers import TrainerCallback

    from trainer_core.training.eta import StepTimes
    from trainer_core.training.grpo import grpo_values
    from trainer_core.training.preference import preference_values

    class ProgressCallback(TrainerCallback):
        samples: list = []  # GRPO: the step's sampled completions, set by the trainer before each log

        in_evaluation = False

        def on_train_begin(self, args, state, control, **kwargs):
            self.t0, self.step0 = time.monotonic(), state.global_step
            self.steps = StepTimes()

        def on_prediction_step(self, args, state, control, **kwargs):
            if not self.in_evaluation:
                self.in_evaluation = True
                words = f"{evaluating[0].upper()}{evaluating[1:]} at step {state.global_step}"
                events.put((EventKind.INFO, {"message": words, "details": {"evaluating": evaluating}}))

        def on_evaluate(self, args, state, control, **kwargs):
            self.in_evaluation = False
            words = f"Evaluated at step {state.global_step}"
            events.put((EventKind.INFO, {"message": words, "details": {"evaluating": None}}))

        def on_step_end(self, args, state, control, **kwargs):
            self.steps.step_ended(time.monotonic())
            if stop.is_set():
                control.should_training_stop = True
                control.should_save = True  # a resumable checkpoint at this very step

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            if "loss" not in logs and "eval_loss" not in logs:
                return  # the end-of-training summary (train_runtime, ...)
            elapsed = time.monotonic() - self.t0
            remaining = max(state.max_steps - state.global_step, 0)
            eta = self.steps.estimate(remaining)
            progress = TrainingProgress(
                job_id=job_id,
                step=state.global_step,
                total_steps=state.max_steps,
                loss=_finite(logs.get("loss")),
                learning_rate=_finite(logs.get("learning_rate")),
                grad_norm=_finite(logs.get("grad_norm")),
                eval_loss=_finite(logs.get("eval_loss")),
                epoch=_finite(state.epoch),
                progress_percent=min(100.0, 100.0 * state.global_step / max(state.max_steps, 1)),
                elapsed_seconds=elapsed,
                eta_seconds=eta[0] if eta else None,
                eta_low_seconds=eta[1] if eta else None,
                eta_high_seconds=eta[2] if eta else None,
                num_tokens=int(state.num_input_tokens_seen) if state.num_input_tokens_seen else None,
                **preference_values(logs),
                **grpo_values(logs),
                **{name: _finite(logs.get(name)) for name in EMBEDDING_EVAL_SERIES},
                samples=self.samples if "loss" in logs else [],
            )
            if state.is_world_process_zero:  # several processes: rank 0 writes the run folder
                with metrics_path.open("a", encoding="utf-8") as fh:
                    fh.write(progress.model_dump_json() + "\n")
            events.put((EventKind.PROGRESS, progress.model_dump()))

    return ProgressCallback()


def _phase(events: Any, phase: Phase, message: str) -> None:
    log.info("%s: %s", phase.value, message)
    events.put((EventKind.PHASE, {"phase": phase.value, "message": message}))


def _rows(done: int, total: int, what: str) -> dict[str, Any]:
    """A ``PHASE_PROGRESS`` payload: ``done`` of ``total`` rows ``what`` (e.g. tokenized)."""
    return {"done": done, "total": total, "unit": f"rows {what}"}


def _load(request: TrainingStartRequest, events: Any) -> tuple[Any, Any, Any, str, Any]:
    """(model, tokenizer or the kind's processor, prepared data, device, the ``ModelKind`` it is
    trained as) for ``request``, loaded as the kind has them (``model_kind.kind_for_request``: its
    model, processor and data where it has its own)."""
    from trainer_core.data import progress
    from trainer_core.data.prepared import prepare_data
    from trainer_core.model_kind import folder_config, kind_for_request
    from trainer_core.models import loading as models
    from trainer_core.settings import get_settings

    _phase(events, Phase.loading_model, f"Loading {request.model_name}")
    token = request.hf_token.get_secret_value() if request.hf_token else None
    path = models.resolve_model_path(request.model_name, token, get_settings().models_dir)
    device = models.pick_device()
    config = folder_config(path)
    kind = kind_for_request(request, path)
    tokenizer = kind.load_processor(path, **models.remote_code(path, request))  # e.g. images + tokenizer
    if tokenizer is None:  # the text path: the tokenizer alone
        tokenizer = models.load_tokenizer(path, request.default_chat_template, **models.remote_code(path, request))
    model = kind.load_model(path, request, device)  # e.g. an embedder
    if model is None:  # the text path
        model = models.load_model(path, request, device)
    _phase(events, Phase.loading_dataset, "Reading and tokenizing the dataset")
    progress.listen(lambda done, total, what: events.put((EventKind.PHASE_PROGRESS, _rows(done, total, what))))
    try:
        data = kind.prepare_data(request, tokenizer)
        if data is None:  # the text path
            data = prepare_data(request, tokenizer)
    finally:
        progress.listen(None)
    if getattr(data, "cache", None) is not None:  # "data: cache hit <key>, N rows, X.X s"
        events.put(
            (
                EventKind.INFO,
                {
                    "message": data.cache.line(),
                    "details": {
                        "token_cache": {name: getattr(data.cache, name) for name in ("key", "hit", "rows", "seconds")}
                    },
                },
            )
        )
    events.put((EventKind.INFO, _data_line(request, data, device, kind.data_note(kind.family(config), data))))
    return model, tokenizer, data, device, kind


def _data_line(request: TrainingStartRequest, data: Any, device: str, note: tuple[str, dict]) -> dict[str, Any]:
    """The ``INFO`` event about the prepared data: rows, tokens, truncation and the model kind's
    ``note`` (its words, its details: e.g. a vision run's images)."""
    stats = data.stats
    rows = {TrainingMethod.sft: "rows", TrainingMethod.kto: "KTO rows", TrainingMethod.grpo: "prompts"}.get(
        request.training_method, "preference pairs"
    )
    return {
        "message": f"{stats.rows} {rows}, {stats.total_tokens} tokens ({stats.trained_tokens} trained); "
        f"{stats.truncated_rows} rows truncated to {stats.max_seq_length} tokens" + note[0],
        "details": {
            "format": data.format.value,
            **note[1],
            "device": device,
            **vars(stats),
            "num_processes": world_size(),
            "global_batch_size": request.batch_size * request.gradient_accumulation_steps * world_size(),
        },
    }


def train(
    request: TrainingStartRequest,
    job_id: str,
    output_dir: Path,
    events: Any,
    stop: Any,
    callbacks: Sequence[Any] = (),
    recorded: Optional[TrainingStartRequest] = None,
) -> tuple[str, Optional[str]]:
    """Load, train and save (whole, via a staging folder; with early stopping, the best checkpoint's
    weights); writes ``run.json`` as training begins (with ``recorded``, the request as the user
    gave it, where ``request``'s paths are a Ray worker's local copies). ``callbacks`` join the
    trainer's (``ray_files.CheckpointReport``). Returns the final phase value (``completed``
    or ``stopped``) and, when early stopping ended the run, why (see ``trainer.early_stop_reason``).
    Raises ``trainer.DivergenceError`` at a NaN / inf loss or grad norm (with
    ``stop_on_divergence``) or instead of saving non-finite weights."""
    from trainer_core.models.precision import request_precision
    from trainer_core.training.grpo import build_grpo_trainer
    from trainer_core.training.preference import build_preference_trainer
    from trainer_core.training.trainer import build_trainer, early_stop_reason

    model, tokenizer, data, device, kind = _load(request, events)
    _phase(events, Phase.configuring, "Building the trainer")
    notices = _prepare_trackers(request, output_dir, events)
    callback = make_progress_callback(job_id, events, stop, output_dir / "metrics.jsonl", kind.evaluating)
    trainer = kind.build_trainer(request, model, data, output_dir, device, [callback, *callbacks], run_name=job_id)
    if trainer is None:  # the text path
        build = {TrainingMethod.sft: build_trainer, TrainingMethod.grpo: build_grpo_trainer}.get(
            request.training_method, build_preference_trainer
        )
        trainer = build(
            request,
            model,
            tokenizer,
            data.train,
            data.eval,
            output_dir,
            device,
            [callback, *callbacks],
            run_name=job_id,
        )
    if stop.is_set():
        return Phase.stopped.value, None
    precision = request_precision(request, device)
    if is_main():  # several processes: rank 0 writes the run folder
        if request.resume_from_checkpoint:
            _trim_metrics(output_dir / "metrics.jsonl", request.resume_from_checkpoint)
        inner = kind.inner_model(trainer.model) or trainer.model
        facts = {"system_message": data.system_message, "tool_format": getattr(data, "tool_format", None)}
        _write_manifest(recorded or request, job_id, output_dir, trainer, inner, facts, precision.model_dump())
    where = f"Training on {device} in {'bf16 mixed precision' if precision.dtype == 'bf16' else 'fp32'}"
    _phase(events, Phase.training, where + "".join(f"; {notice}" for notice in notices))
    trainer.train(resume_from_checkpoint=request.resume_from_checkpoint)
    trainer.save_final(output_dir)
    if stop.is_set():
        return Phase.stopped.value, None
    return Phase.completed.value, early_stop_reason(trainer)


def _prepare_trackers(request: TrainingStartRequest, output_dir: Path, events: Any) -> list[str]:
    """Point ``request.report_to``'s trackers at ``output_dir`` (this process's environment only,
    see ``trackers.prepare_trackers``); the notices (e.g. wandb going offline) go out as an INFO
    event (status message, ``details["tracker_notices"]``) and are returned for the training message.
    The request's ``wandb_token`` becomes this worker's ``WANDB_API_KEY`` (never logged)."""
    from trainer_core.training.trackers import prepare_trackers

    if request.wandb_token is not None:
        os.environ["WANDB_API_KEY"] = request.wandb_token.get_secret_value()
    tensorboard_dir = Path(request.tensorboard_dir) if request.tensorboard_dir else None
    notices = prepare_trackers(
        request.report_to, output_dir, tensorboard_dir=tensorboard_dir, wandb_project=request.wandb_project
    )
    if notices:
        events.put((EventKind.INFO, {"message": "; ".join(notices), "details": {"tracker_notices": notices}}))
    return notices


def _write_manifest(
    request: TrainingStartRequest,
    job_id: str,
    output_dir: Path,
    trainer: Any,
    model: Any,
    facts: dict[str, Optional[str]],
    precision: dict[str, Any],
) -> None:
    """``run.json`` with the resolved TRL and PEFT configs (PEFT's of ``model``, the transformers
    model trained: ``ModelKind.inner_model``), the data's ``facts`` (its shared system message and
    how its tools were rendered: ``begin_manifest``'s keywords) and the
    precision used (``models.precision.Precision``, under ``model_structure``; see
    ``training.manifest``); a failure to
    write it is logged, not fatal (the job thread writes it again at the end)."""
    from trainer_core.training.manifest import begin_manifest

    peft_config = getattr(model, "peft_config", None) or {}
    try:
        begin_manifest(
            output_dir,
            request,
            job_id,
            trainer.args,
            next(iter(peft_config.values()), None),
            {**_structure(trainer, model), "precision": precision},
            **facts,
        )
    except OSError:
        log.exception("could not write run.json")


def _structure(trainer: Any, model: Any = None) -> dict[str, Any]:
    """The attention implementation, whether batches are padding-free (``packed_rows``) and the
    adapted modules (``models.targets.adapted``; None where the model has no block list) of
    ``model``, the transformers model trained (default: ``trainer.model``)."""
    from trainer_core.models.targets import TargetError, adapted

    model = trainer.model if model is None else model

    try:
        found = adapted(model)
    except TargetError:  # a full fine-tune of a model without block lists: nothing adapted to list
        found = None
    return {
        "attention": model.config._attn_implementation,
        "padding_free": bool(getattr(trainer.args, "padding_free", False)),
        "adapted": found,
    }


def _trim_metrics(metrics_path: Path, checkpoint: str) -> None:
    """On resume, drop logged steps after the checkpoint's step: they are about to be redone."""
    state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    if metrics_path.is_file():
        lines = metrics_path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if json.loads(line)["step"] <= state.get("global_step", 0)]
        metrics_path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def _quiet_progress_bars() -> None:
    """The app's console is for the app's log lines; the worker reports through events."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    # Raised by peft/trl internals calling the transformers 4 name on every run; nothing for users to do.
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def run_worker(
    request: TrainingStartRequest,
    job_id: str,
    output_dir: str,
    events: Any,
    stop: Any,
    callbacks: Sequence[Any] = (),
    recorded: Optional[TrainingStartRequest] = None,
) -> None:
    """Process entry point. Never raises: failures become one ``error`` event (the traceback goes
    to ``<output_dir>/worker.log`` only). Removes staging folders a killed earlier save left.
    In a group of processes (``trainer_core.distributed``) only rank 0 writes the run folder; the
    other ranks log to stderr (the launcher's ``launcher.log``). ``callbacks`` and ``recorded``: see
    ``train``."""
    exit_with_parent()
    out = Path(output_dir)
    if not is_main():
        logging.basicConfig(
            stream=sys.stderr,
            level=logging.INFO,
            format=f"%(asctime)s %(levelname)s rank {rank()} %(name)s: %(message)s",
        )
    else:
        try:
            _open_run_folder(recorded or request, out)
        except OSError as exc:
            events.put(
                (
                    EventKind.ERROR,
                    {"message": f"output_dir {out} cannot be used ({exc.strerror}): choose another folder"},
                )
            )
            return
    _quiet_progress_bars()
    try:
        phase, stop_reason = train(request, job_id, out, events, stop, callbacks, recorded)
    except BaseException as exc:  # noqa: BLE001 - the process boundary: report everything
        log.error("training failed:\n%s", redact(traceback.format_exc(), request))
        events.put((EventKind.ERROR, {"message": redact(user_message(exc, out), request)}))
        return
    verb = "stopped and saved" if phase == Phase.stopped.value else "completed"
    done = {"phase": phase, "message": f"Training {verb}; output in {out}", "output_dir": str(out)}
    if not is_main():  # a run across machines, reported on machine R > 0: machine 0 holds the result
        done["message"] = (
            f"Training {verb} on this machine (machine {node_rank()}); machine 0 (rank 0) saved the adapter "
            "and checkpoints in its run folder"
        )
    if stop_reason:
        done.update(message=f"{stop_reason}; best weights saved in {out}", stop_reason=stop_reason)
    events.put((EventKind.DONE, done))


def _open_run_folder(request: TrainingStartRequest, out: Path) -> None:
    """Create the run folder, log to its ``worker.log``, write ``request.json`` (no secrets) and
    remove staging folders a killed earlier pass left. Raises OSError."""
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=out / "worker.log", level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    (out / "request.json").write_text(json.dumps(request.public_dict(), indent=2), encoding="utf-8")
    remove_partial_saves(out)  # left by a killed earlier pass over this folder (a resumed run)
