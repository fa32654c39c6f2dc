"""Faults on CPU: a diverging run (the real SmolLM2-135M) ends in error with no NaN weights
on disk and its last good checkpoint kept; a worker killed or cancelled in the middle of a checkpoint
save leaves no half checkpoint (the tiny SmolLM2). Driven through an in-process JobRunner with the real worker."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from trainer_core.runs.job import JobRunner
from trainer_core.runs.resume import find_resume_target
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.checkpoints import latest_checkpoint
from trainer_core.vocabulary import Phase

pytestmark = pytest.mark.slow
SMALL = dict(batch_size=2, max_seq_length=128, dataset_slice_end=32)
# Diverges at step 3 on CPU (fp32): a LoRA scale of alpha / r = 1024 on q/k, lr 0.99 and no clipping
# make the attention scores overflow, so the step-3 gradient is NaN. (With all seven projections the
# model instead saturates to a uniform prediction, loss ln(49152) = 10.80, without any NaN.)
DIVERGING = dict(
    learning_rate=0.99,
    optim="sgd",
    lora_r=4,
    lora_alpha=4096,
    max_grad_norm=0,
    max_steps=6,
    target_modules=["q_proj", "k_proj"],
    save_steps=1,
)
CHECKPOINT_FILES = {"adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"}


@pytest.fixture
def runner(tmp_path):
    runner = JobRunner(runs_dir=tmp_path / "runs", store=RunStore(tmp_path / "studio.db"), warm_modules=())
    yield runner
    runner.stop(save=False)
    runner.wait(30)


def _request(datasets_dir: Path, tiny_model_dir: Path, out: Path, **fields) -> TrainingStartRequest:
    return TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "alpaca_en_demo.json")],
        output_dir=str(out),
        **{**SMALL, **fields},
    )


def _non_finite(files: list[Path]) -> list[str]:
    """'file:tensor' for every tensor holding a NaN or inf in the given safetensors files."""
    import torch
    from safetensors.torch import load_file

    return [f"{f}:{key}" for f in files for key, t in load_file(f).items() if not torch.isfinite(t).all()]


def _assert_whole_checkpoints(out: Path) -> None:
    assert not list(out.glob(".partial-*"))
    for folder in out.glob("checkpoint-*"):
        assert CHECKPOINT_FILES <= {p.name for p in folder.iterdir()}, folder


@pytest.mark.parametrize("guard", [True, False], ids=["guard", "no-guard"])
def test_a_diverging_run_ends_in_error_and_saves_no_nan_weights(runner, tmp_path, datasets_dir, model_dir, guard):
    """The real model: the recipe below overflows its attention scores (the tiny model, with its
    small random activations, only saturates)."""
    out = tmp_path / "out"
    assert (
        runner.start(_request(datasets_dir, model_dir, out, stop_on_divergence=guard, **DIVERGING)).status == "queued"
    )
    assert runner.wait(300)
    status = runner.status()
    assert status.phase == Phase.error and status.message == "Training failed.", status.error
    step = int(re.match(r"Training diverged at step (\d+): ", status.error).group(1))
    cause = "grad_norm is nan" if guard else "the trained weights hold NaN or inf values"
    assert cause in status.error and "max_grad_norm (e.g. 1.0)" in status.error
    assert step >= 2 and status.metric_history.steps[-1] == step  # it stopped at the step it names
    files = list(out.rglob("*.safetensors"))
    assert files and _non_finite(files) == []
    assert not (out / "adapter_model.safetensors").exists()  # no final save of a diverged model
    last = latest_checkpoint(out)
    assert last == out / f"checkpoint-{step - 1}" and not (out / f"checkpoint-{step}").exists()
    _assert_whole_checkpoints(out)
    assert runner.store.get_run(status.job_id).last_checkpoint == str(last)
    assert find_resume_target(runner.store, str(last)).step == step - 1  # an error run can be resumed


def _staged(out: Path) -> list[Path]:
    """The checkpoint folders inside staging folders now; [] when a staging folder was renamed
    away while being listed (the save finished meanwhile)."""
    try:
        return list(out.glob(".partial-checkpoint-*/checkpoint-*"))
    except FileNotFoundError:
        return []


def _freeze_mid_save(runner: JobRunner, out: Path, min_step: int, timeout_s: float = 300) -> tuple[int, int]:
    """SIGSTOP the worker while checkpoint-N (N >= ``min_step``) is written into its staging folder
    and not yet renamed into place; returns (pid, N). Polls every millisecond."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        process = runner._process
        staged = [p for p in _staged(out) if int(p.name.split("-")[1]) >= min_step]
        if process is None or not staged:
            time.sleep(0.001)
            continue
        os.kill(process.pid, signal.SIGSTOP)
        step = int(staged[0].name.split("-")[1])
        if staged[0].exists() and not (out / staged[0].name).exists():
            return process.pid, step
        os.kill(process.pid, signal.SIGCONT)  # it finished that save meanwhile: catch the next one
    pytest.fail("no checkpoint save was caught in progress")


@pytest.mark.parametrize("how", ["kill", "cancel"])
def test_a_worker_ended_mid_save_leaves_no_half_checkpoint(runner, tmp_path, datasets_dir, tiny_model_dir, how):
    out = tmp_path / "out"
    assert runner.start(_request(datasets_dir, tiny_model_dir, out, max_steps=6, save_steps=1)).status == "queued"
    pid, step = _freeze_mid_save(runner, out, min_step=2)
    if how == "kill":
        os.kill(pid, signal.SIGKILL)  # as a user's kill -9 would
    else:
        assert runner.stop(save=False)  # SIGTERM (held: the worker is stopped), SIGKILL after 1 s
    assert runner.wait(60)
    status = runner.status()
    if how == "kill":
        assert status.phase == Phase.error
        assert "killed (signal 9) by something outside the studio" in status.error
        assert "ran out of memory" not in status.error
    else:
        assert status.phase == Phase.stopped
        assert status.message == f"Cancelled; nothing more was saved (last checkpoint: checkpoint-{step - 1})."
    assert latest_checkpoint(out) == out / f"checkpoint-{step - 1}"
    assert not (out / f"checkpoint-{step}").exists()
    _assert_whole_checkpoints(out)  # and the staging folder of the interrupted save is gone
