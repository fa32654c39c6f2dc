"""The export worker's faults through a real ``TaskRunner`` (spawned worker, no model): a full disk
while writing is an error naming the disk and leaves nothing; Cancel ends it at the next stage.
The targets are module-level (spawn imports them) and patch the export code inside the worker."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tests.support import fake_workers
from trainer_core.runs.folders import claim
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskEvent, TaskKind, TaskPhase


def _full_disk(job):
    (job.out / "model.safetensors").write_bytes(b"x" * 1000)  # half written
    raise OSError(errno.ENOSPC, "No space left on device", str(job.out / "model.safetensors"))


def _full_disk_in_safetensors(job):
    from safetensors import SafetensorError

    (job.out / "model.safetensors").write_bytes(b"x" * 1000)
    # safetensors' own words for ENOSPC (measured on a full tmpfs): no errno, no OSError
    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def _endless(job):
    (job.out / "partial.bin").write_bytes(b"x")
    while True:
        job.progress.begin("work", 0.5, "working")  # raises Cancelled once stop is set
        job.progress.stop.wait(0.05)


def enospc_export(request, context, events, stop):
    """run_export with an exporter that fills the disk."""
    from trainer_core.export import worker

    worker.exporter = lambda fmt: _full_disk
    worker.run_export(request, context, events, stop)


def enospc_safetensors_export(request, context, events, stop):
    """run_export with an exporter whose safetensors write fills the disk."""
    from trainer_core.export import worker

    worker.exporter = lambda fmt: _full_disk_in_safetensors
    worker.run_export(request, context, events, stop)


def endless_export(request, context, events, stop):
    """run_export with an exporter that works until cancelled."""
    from trainer_core.export import worker

    worker.exporter = lambda fmt: _endless
    worker.run_export(request, context, events, stop)


@pytest.fixture
def setup(tmp_path: Path):
    settings = Settings(data_dir=tmp_path / "data")
    store = RunStore(settings.db_path)
    jobs = JobRunner(
        worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store, warm_modules=()
    )
    folder = settings.runs_dir / "job-1"
    folder.mkdir(parents=True)
    claim(folder, "job-1")
    store.create_run("job-1", {"model_name": "m"}, str(folder), "completed")
    choice = ModelChoice(
        id="job-1", label="job-1", kind="final", base_model="m", path=str(folder), job_id="job-1", adapter=True
    )
    tasks = TaskRunner(jobs, settings)
    yield tasks, choice, jobs
    tasks.cancel()
    tasks.wait(10)


@pytest.mark.parametrize("target", [enospc_export, enospc_safetensors_export], ids=["oserror", "safetensors"])
def test_a_full_disk_is_an_error_naming_the_disk_and_leaves_nothing(setup, target):
    tasks, choice, _ = setup
    record = tasks.start(TaskKind.export, choice, {"model": "job-1", "format": "merged"}, target)
    assert tasks.wait(60)
    done = tasks.get(record.task_id)
    assert done.phase == TaskPhase.failed and done.result is None
    assert done.error.startswith("Disk full: ")
    assert "disk holding" in done.error and "is full" in done.error and "nothing of this export was kept" in done.error
    assert str(Path(choice.path) / "exports") in done.error
    assert not Path(done.output_dir).exists()


def test_cancel_ends_the_export_and_leaves_nothing(setup):
    tasks, choice, _ = setup
    record = tasks.start(TaskKind.export, choice, {"model": "job-1", "format": "merged"}, endless_export)
    for _ in range(300):  # the worker imports transformers first (a few seconds)
        live = tasks.get(record.task_id)
        if live.message == "working":
            break
        tasks.wait(0.1)
    assert tasks.cancel(record.task_id)
    assert tasks.wait(30)
    done = tasks.get(record.task_id)
    assert done.phase == TaskPhase.cancelled and not Path(done.output_dir).exists()


def test_run_export_reports_bad_input_as_an_input_error(tmp_path):
    from trainer_core.export.worker import run_export

    class Events(list):
        def put(self, event):
            self.append(event)

    events = Events()
    choice = ModelChoice(id="job-1", label="", kind="final", base_model="m", path=str(tmp_path), adapter=False)
    run_export(
        {"model": "job-1", "format": "adapter"},
        {"choice": choice.model_dump(), "output_dir": str(tmp_path)},
        events,
        None,
    )
    assert events[-1][0] == TaskEvent.ERROR and events[-1][1]["kind"] == "input"
    assert "full fine-tune" in events[-1][1]["message"]


def test_start_export_is_refused_while_training(setup):
    from trainer_core.export.schemas import ExportRequest
    from trainer_core.export.start import start_export
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.tasks.runner import TaskRefused

    tasks, choice, jobs = setup
    (Path(choice.path) / "adapter_model.safetensors").write_bytes(b"")
    assert jobs.start(TrainingStartRequest(local_datasets=["x.json"])).status == "queued"
    try:
        with pytest.raises(TaskRefused) as busy:
            start_export(tasks, ExportRequest(model="job-1", format="adapter"))
        assert busy.value.status == 409 and "training job is running" in str(busy.value)
    finally:
        jobs.stop(save=False)
        jobs.wait(10)


@pytest.mark.slow
def test_cli_export_of_damaged_weights_is_one_line_and_leaves_nothing(tmp_path, tiny_model_dir, capsys):
    """A run folder whose adapter file is cut short: ``export`` says so on one line, exits 1 and
    leaves no export folder (found by the break-it pass: it printed a traceback and left one)."""
    import json
    import shutil

    from trainer_core.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "task_type": "CAUSAL_LM",
                "base_model_name_or_path": str(tiny_model_dir),
                "r": 8,
                "lora_alpha": 16,
                "target_modules": ["q_proj", "v_proj"],
            }
        )
    )
    (run / "adapter_model.safetensors").write_bytes(b"\x00" * 1000)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tiny_model_dir / name).is_file():
            shutil.copy(tiny_model_dir / name, run / name)
    code = main(["export", str(run), "--format", "adapter"])
    err = capsys.readouterr().err
    assert code == 1 and "error:" in err and "Traceback" not in err
    assert not any((run / "exports").rglob("*")) if (run / "exports").exists() else True
