"""Light stand-ins for ``trainer_core.training.worker.run_worker`` (same signature and event protocol), so the
runner's locking and supervision can be tested in seconds. Module-level: spawn must import them."""

import json
import os
import signal
import time
from pathlib import Path

from trainer_core.schemas import TrainingProgress
from trainer_core.training.worker import EventKind


def stepping_worker(request, job_id, output_dir, events, stop):
    """Reports training steps every 50 ms until stopped (then 'stopped') or 200 steps ('completed')."""
    events.put((EventKind.PHASE, {"phase": "training", "message": "fake training"}))
    for step in range(1, 201):
        if stop.is_set():
            events.put((EventKind.DONE, {"phase": "stopped", "message": "stopped", "output_dir": output_dir}))
            return
        events.put((EventKind.PROGRESS, TrainingProgress(job_id=job_id, step=step, total_steps=200, loss=1.0 / step).model_dump()))
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
