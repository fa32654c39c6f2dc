"""Light stand-ins for ``trainer_core.training.worker.run_worker`` (same signature and event protocol), so the
runner's locking and supervision can be tested in seconds. Module-level: spawn must import them."""

import json
import os
import signal
import time
from pathlib import Path

from trainer_core.status import TrainingProgress
from trainer_core.training.worker import EventKind


def stepping_worker(request, job_id, output_dir, events, stop):
    """Reports training steps every 50 ms until stopped (then 'stopped') or ``request.max_steps``
    steps, 200 when it is 0 ('completed')."""
    events.put((EventKind.PHASE, {"phase": "training", "message": "fake training"}))
    total = getattr(request, "max_steps", 0) or 200
    for step in range(1, total + 1):
        if stop.is_set():
            events.put((EventKind.DONE, {"phase": "stopped", "message": "stopped", "output_dir": output_dir}))
            return
        events.put(
            (
                EventKind.PROGRESS,
                TrainingProgress(job_id=job_id, step=step, total_steps=total, loss=1.0 / step).model_dump(),
            )
        )
        time.sleep(0.05)
    events.put((EventKind.DONE, {"phase": "completed", "message": "done", "output_dir": output_dir}))


def dying_worker(request, job_id, output_dir, events, stop):
    """Reports one phase, then is killed by SIGKILL, as the kernel's OOM killer would."""
    events.put((EventKind.PHASE, {"phase": "loading_model", "message": "loading"}))
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)


def stubborn_worker(request, job_id, output_dir, events, stop):
    """Ignores SIGTERM and never reports: only SIGKILL ends it (like a hung native call)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    events.put((EventKind.PHASE, {"phase": "loading_model", "message": "loading"}))
    time.sleep(600)


def pid_worker(request, job_id, output_dir, events, stop):
    """Reports its process id, then completes."""
    events.put((EventKind.INFO, {"message": "pid", "details": {"worker_pid": os.getpid()}}))
    events.put((EventKind.DONE, {"phase": "completed", "message": "done", "output_dir": output_dir}))


def saving_worker(request, job_id, output_dir, events, stop):
    """Leaves a complete checkpoint-2 and a half-written checkpoint-3 (in its staging folder, as the
    trainer writes it), reports training, then waits to be cancelled."""
    out = Path(output_dir)
    (out / "checkpoint-2").mkdir(parents=True)
    (out / "checkpoint-2" / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    (out / ".partial-checkpoint-3" / "checkpoint-3").mkdir(parents=True)
    (out / ".partial-checkpoint-3" / "checkpoint-3" / "adapter_model.safetensors").write_bytes(b"half")
    events.put((EventKind.PHASE, {"phase": "training", "message": "fake training"}))
    time.sleep(600)


def checkpointing_worker(request, job_id, output_dir, events, stop):
    """The real worker's clocks without a model: a step every 50 ms, ``elapsed_seconds`` from its own
    start (a resumed session starts near 0 again), ``num_tokens`` = 10 per step over the whole run.
    Resumes after ``request.resume_from_checkpoint``'s step; on stop saves checkpoint-<step>
    (trainer_state.json) and reports 'stopped'; 'completed' after step 200."""
    first = 1
    if request.resume_from_checkpoint:
        state = json.loads((Path(request.resume_from_checkpoint) / "trainer_state.json").read_text())
        first = state["global_step"] + 1
    events.put((EventKind.PHASE, {"phase": "training", "message": "fake training"}))
    began = time.monotonic()
    for step in range(first, 201):
        time.sleep(0.05)
        progress = TrainingProgress(
            job_id=job_id,
            step=step,
            total_steps=200,
            loss=1.0 / step,
            elapsed_seconds=time.monotonic() - began,
            num_tokens=10 * step,
        )
        events.put((EventKind.PROGRESS, progress.model_dump()))
        if stop.is_set():
            checkpoint = Path(output_dir) / f"checkpoint-{step}"
            checkpoint.mkdir(parents=True)
            (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
            events.put((EventKind.DONE, {"phase": "stopped", "message": "stopped", "output_dir": output_dir}))
            return
    events.put((EventKind.DONE, {"phase": "completed", "message": "done", "output_dir": output_dir}))


SLOW_START_STEPS = 4646  # max_steps that asks page_worker for a slow start (a standby worker has its env already)


def page_worker(request, job_id, output_dir, events, stop):
    """What the page's browser tests watch: half a second of model loading (and, with max_steps
    ``SLOW_START_STEPS``, 6 s of tokenizing 90 rows), then up to
    ``max_steps`` (default 30) training steps every 0.25 s with loss, learning rate, grad norm and
    tokens. Stop saves ``checkpoint-<step>`` (resumable) and ends 'stopped'; a resume continues from
    the checkpoint's step."""
    events.put((EventKind.PHASE, {"phase": "loading_model", "message": "loading the model"}))
    time.sleep(0.5)
    slow = 6.0 if request.max_steps == SLOW_START_STEPS else 0.0  # seconds of tokenizing, reported as the worker does
    events.put((EventKind.PHASE, {"phase": "loading_dataset", "message": "Reading and tokenizing the dataset"}))
    for done in range(0, 91, 10) if slow else ():
        events.put((EventKind.PHASE_PROGRESS, {"done": done, "total": 90, "unit": "rows tokenized"}))
        time.sleep(slow / 10)
    events.put((EventKind.PHASE, {"phase": "training", "message": "training"}))
    first = 1
    if request.resume_from_checkpoint:
        first = json.loads((Path(request.resume_from_checkpoint) / "trainer_state.json").read_text())["global_step"] + 1
    total = request.max_steps or 30
    began = time.monotonic()
    for step in range(first, total + 1):
        if stop.is_set():
            folder = Path(output_dir) / f"checkpoint-{step - 1}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "trainer_state.json").write_text(json.dumps({"global_step": step - 1}))
            events.put((EventKind.DONE, {"phase": "stopped", "message": "Stopped and saved", "output_dir": output_dir}))
            return
        events.put(
            (
                EventKind.PROGRESS,
                TrainingProgress(
                    job_id=job_id,
                    step=step,
                    total_steps=total,
                    loss=2.0 / step,
                    learning_rate=request.learning_rate,
                    grad_norm=1.0 + step / 10,
                    num_tokens=step * 400,
                    elapsed_seconds=time.monotonic() - began,
                ).model_dump(),
            )
        )
        time.sleep(0.25)
    (Path(output_dir) / "adapter_model.safetensors").write_bytes(b"w")  # final weights, as a LoRA run saves
    (Path(output_dir) / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": request.model_name}))
    events.put((EventKind.DONE, {"phase": "completed", "message": "Training completed", "output_dir": output_dir}))
