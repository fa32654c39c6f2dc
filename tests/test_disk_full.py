"""A full disk while a run saves (issue 25, item 8), on a real small file system: the run ends in
error with a "Disk full" message naming the checkpoint kept, that checkpoint stays whole and
resumable, no partial save is left, and the history keeps the run and its steps."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import TINY_LEARNING_RATE
from trainer_core.process.disk_full import is_disk_full
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.schemas import Phase, TrainingStartRequest
from trainer_core.settings import Settings

DISK_MB = 8  # the tiny model's checkpoint (LoRA + optimizer + tokenizer) is about 2.6 MB: the third does not fit


@pytest.fixture
def small_disk(tmp_path):
    """An ``DISK_MB`` MB tmpfs (needs root, as CI and this machine run; skipped elsewhere)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_writer_error_is_told_apart(small_disk, tmp_path):
    import torch

    with pytest.raises(RuntimeError) as torch_error:  # torch.save: no errno, only "unexpected pos"
        torch.save({"w": torch.zeros(4 * 2**20)}, small_disk / "w.pt")
    assert is_disk_full(torch_error.value, small_disk)  # the disk is nearly full right now
    assert not is_disk_full(torch_error.value, tmp_path)  # the same words where there is room: not a full disk
    assert not is_disk_full(RuntimeError("unexpected pos"), None)
    assert is_disk_full(OSError(28, "No space left on device"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_checkpoint_that_fills_the_disk_keeps_the_previous_one(small_disk, tmp_path, tiny_model_dir, datasets_dir):
    settings = Settings(data_dir=tmp_path / "data")  # the history lives on another disk, as by default
    store = RunStore(settings.db_path)
    runner = JobRunner(runs_dir=settings.runs_dir, store=store, warm_modules=())
    output_dir = small_disk / "run"
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        output_dir=str(output_dir),
        training_type="lora",
        max_steps=12,
        save_steps=1,
        batch_size=2,
        max_seq_length=64,
        dataset_slice_end=32,
        learning_rate=TINY_LEARNING_RATE,
    )
    job_id = runner.start(request).job_id
    assert runner.wait(240)
    status = runner.status()
    assert status.phase == Phase.error, status.message
    kept = sorted(output_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert kept, "no checkpoint fitted on the disk"
    last = kept[-1]
    step = int(last.name.split("-")[1])
    assert status.error.startswith(f"Disk full: the checkpoint at step {step + 1} could not be written to {output_dir}")
    assert f"The previous checkpoint {last.name} is kept as it was" in status.error
    assert f"resume the run from {last.name}" in status.error
    assert "Traceback" not in status.error
    assert not list(output_dir.glob(".partial-*"))  # the partial save is gone
    state = json.loads((last / "trainer_state.json").read_text())
    assert state["global_step"] == step  # whole: its trainer state, adapter and optimizer are there
    assert (last / "adapter_model.safetensors").stat().st_size > 0 and (last / "optimizer.pt").stat().st_size > 0

    record = store.get_run(job_id)  # the history keeps the run, its steps and its last checkpoint
    assert record.phase == "error" and record.error == status.error
    assert record.last_checkpoint == str(last)
    assert [m.step for m in record.metrics if m.loss is not None] == list(range(1, step + 2))
    store.close()
