"""A full disk, on a real small file system. While a run saves: the run ends in
error with a "Disk full" message naming the checkpoint kept, that checkpoint stays whole and
resumable, no partial save is left, and the history keeps the run and its steps. At the doors that
write: a run's label, a share link, a queued job and an export answer 507 over
HTTP and a notice on the page, change nothing, and work again once space is freed."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import TINY_LEARNING_RATE
from trainer_core.process.disk_full import DISK_FULL_CODE, is_disk_full
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import Phase

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


def fill(disk) -> None:
    """Write a filler file on ``disk`` until not one more byte fits."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (2**20, 4096, 1):
            try:
                while True:
                    os.write(fd, b"x" * size)
            except OSError as exc:
                assert is_disk_full(exc)
    finally:
        os.close(fd)


JOB = "job_20250102_090000_0a0b0c0d"


@pytest.fixture
def studio_on_small_disk(small_disk, tiny_model_dir, datasets_dir, monkeypatch):
    """(TestClient of the whole app, its settings) with the data dir (run history, runs, uploads) on
    ``small_disk``, one finished LoRA run ``JOB`` (a stand-in adapter) in the history, the queue's
    dispatcher stopped (queued jobs wait) and the export worker a light stand-in."""
    from fastapi.testclient import TestClient

    from server import build_app
    from tests.support import fake_task_workers, fake_workers
    from trainer_core.export import worker

    monkeypatch.setattr(worker, "run_export", fake_task_workers.writing_task)
    settings = Settings(data_dir=small_disk / "data", allowed_paths=f"{datasets_dir},{tiny_model_dir.parent}")
    store = RunStore(settings.db_path)
    folder = settings.runs_dir / JOB
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"stand-in")
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tiny_model_dir)}))
    store.create_run(JOB, {"model_name": str(tiny_model_dir)}, str(folder), "completed")
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    app = build_app(settings, runner)
    app.state.queue.close()
    with TestClient(app) as client:
        yield client, settings
        app.state.tasks.wait(30)


def test_the_doors_that_write_answer_507_on_a_full_disk_and_work_again(
    studio_on_small_disk, tiny_model_dir, datasets_dir
):
    from tests.e2e.conftest import form_args
    from tests.support.raw_gradio import RawGradio, error_text

    client, settings = studio_on_small_disk
    app = client.app
    job = {"model_name": str(tiny_model_dir), "local_datasets": [str(datasets_dir / "identity.json")], "max_steps": 2}
    writes = [
        ("PATCH", f"/api/train/runs/{JOB}", {"name": "renamed", "note": "kept"}),
        ("POST", "/api/train/share", {"model": JOB, "expires_in_hours": 1}),
        ("POST", "/api/train/queue", job),
        ("POST", "/api/train/export", {"model": JOB, "format": "adapter"}),
    ]

    def stored() -> tuple:
        """What the four doors write: the run's label, the links, the queue, the tasks, the files."""
        run = app.state.runner.store.get_record(JOB)
        files = sorted(
            str(p.relative_to(settings.data_dir)) for p in settings.data_dir.rglob("*") if "studio.db" not in p.name
        )
        return (
            run.name,
            run.note,
            app.state.share_links.list(),
            app.state.queue.entries(),
            app.state.tasks.list(),
            files,
        )

    before = stored()
    fill(settings.data_dir.parent)
    for method, path, body in writes:
        answer = client.request(method, path, json=body)
        assert answer.status_code == 507, (path, answer.text)
        refusal = answer.json()
        assert refusal["code"] == DISK_FULL_CODE == "disk_full"
        assert refusal["detail"].startswith(
            f"Disk full: nothing was saved. The disk holding {settings.data_dir} has 0.0 MiB free."
        )
        assert "Free some space" in refusal["detail"] and "then try again" in refusal["detail"]
        assert stored() == before, path  # nothing half-written: no label, link, entry, task or folder
    raw = RawGradio(client)  # the page's own events, called as the page (or an attacker) would
    for api_name, data in (
        ("run_label", [JOB, "renamed", "kept", "", "all", ""]),
        ("share_create", [JOB, 1]),
        ("export", [JOB, JOB, "adapter", "float32", []]),
    ):
        shown = raw.call(raw.fn_index(api_name), data)
        assert error_text(shown).startswith("Disk full: nothing was saved."), (api_name, shown)
    queued = raw.call(raw.fn_index("queue_add"), form_args(job["local_datasets"][0], **job), pad=True)
    assert (
        "Not queued" in queued["output"]["data"][2] and "Disk full: nothing was saved." in queued["output"]["data"][2]
    )
    assert stored() == before

    (settings.data_dir.parent / "filler").unlink()  # space freed: every door works again
    for method, path, body in writes:
        answer = client.request(method, path, json=body)
        assert answer.status_code in (200, 201), (path, answer.text)
    assert app.state.tasks.wait(30)
    name, note, links, queued, tasks, _ = stored()
    assert (name, note) == ("renamed", "kept") and [link.model_id for link in links] == [JOB]
    assert [entry.state.value for entry in queued] == ["waiting"] and [t.phase.value for t in tasks] == ["completed"]
