"""The background task runner (export / evaluate / push): one task at a time, stored with its
result, training and tasks exclude each other, a failed or cancelled task leaves no files."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support import fake_task_workers, fake_workers
from trainer_core.runs.folders import MARKER, claim
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRefused, TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase
from trainer_core.tasks.store import TaskStore


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
    yield tasks, jobs, choice, folder
    tasks.cancel()
    tasks.wait(10)
    jobs.stop(save=False)
    jobs.wait(10)


def _finish(tasks: TaskRunner, task_id: str):
    assert tasks.wait(30)
    return tasks.get(task_id)


def test_a_task_runs_in_its_folder_and_is_stored_with_its_result(setup) -> None:
    tasks, _, choice, folder = setup
    (folder / "notes.txt").write_text("the user's own notes")
    record = tasks.start(
        TaskKind.export,
        choice,
        {"bytes": 123, "token": "hf_secret"},
        fake_task_workers.writing_task,
        public_request={"bytes": 123},
    )
    assert record.phase == TaskPhase.running and Path(record.output_dir) == folder / "exports" / record.task_id
    done = _finish(tasks, record.task_id)
    assert done.phase == TaskPhase.completed and done.progress == 1.0 and done.message == "Done"
    assert done.result["size_bytes"] == 123 and done.result["seen_token"] is True
    assert (Path(done.output_dir) / "out.bin").stat().st_size == 123
    stored = TaskStore(tasks.settings.db_path).get(record.task_id)
    assert stored == done and "hf_secret" not in tasks.settings.db_path.read_bytes().decode("latin-1")
    files = json.loads((folder / MARKER).read_text())["files"]  # Delete removes the export too
    assert f"exports/{record.task_id}/out.bin" in files
    assert "notes.txt" not in files  # the user's file beside the run's is not taken for the run's
    assert [r.task_id for r in tasks.list("job-1", TaskKind.export)] == [record.task_id]


def test_a_check_that_did_not_pass_keeps_the_files_marked_failed(setup) -> None:
    tasks, _, choice, _ = setup
    record = tasks.start(TaskKind.export, choice, {"passed": False}, fake_task_workers.writing_task)
    done = _finish(tasks, record.task_id)
    assert done.phase == TaskPhase.failed and done.result["passed"] is False
    assert "check did not pass" in done.message and (Path(done.output_dir) / "out.bin").is_file()


@pytest.mark.parametrize(
    "target, reason",
    [(fake_task_workers.failing_task, "No space left on device"), (fake_task_workers.dying_task, "killed (signal 9)")],
)
def test_an_error_or_a_killed_worker_fails_the_task_and_leaves_nothing(setup, target, reason) -> None:
    tasks, _, choice, _ = setup
    record = tasks.start(TaskKind.export, choice, {}, target)
    done = _finish(tasks, record.task_id)
    assert done.phase == TaskPhase.failed and reason in done.error and done.result is None
    assert not Path(done.output_dir).exists()


@pytest.mark.parametrize("target", [fake_task_workers.failing_task, fake_task_workers.dying_task])
def test_a_recipe_run_that_fails_or_is_killed_keeps_its_folder(setup, tmp_path, target) -> None:
    tasks, _, choice, _ = setup
    folder = tmp_path / "recipes" / "topics-1"
    record = tasks.start(TaskKind.recipe, choice, {}, target, context={}, output_dir=folder)
    assert record.output_dir == str(folder)
    done = _finish(tasks, record.task_id)
    assert done.phase == TaskPhase.failed and done.result is None and folder.is_dir()  # for a resume
    assert done.message.endswith("the records made so far are kept in topics-1 (resume to finish)")


def test_cancel_ends_the_task_within_seconds_and_leaves_nothing(setup) -> None:
    tasks, _, choice, _ = setup
    record = tasks.start(TaskKind.evaluate, choice, {}, fake_task_workers.slow_task)
    deadline = time.monotonic() + 20
    while tasks.get(record.task_id).progress == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not tasks.cancel("someone-elses-task")
    began = time.monotonic()
    assert tasks.cancel(record.task_id)
    done = _finish(tasks, record.task_id)
    assert time.monotonic() - began < 4
    assert done.phase == TaskPhase.cancelled and not Path(done.output_dir).exists()
    assert tasks.current() is None and not tasks.cancel()


def test_one_task_at_a_time_and_training_excludes_tasks(setup) -> None:
    from trainer_core.schemas import TrainingStartRequest

    tasks, jobs, choice, _ = setup
    record = tasks.start(TaskKind.evaluate, choice, {}, fake_task_workers.slow_task)
    with pytest.raises(TaskRefused) as second:
        tasks.start(TaskKind.export, choice, {}, fake_task_workers.writing_task)
    assert second.value.status == 409 and record.task_id in str(second.value)
    refused = jobs.start(TaskRequest := TrainingStartRequest(local_datasets=["x.json"]))
    assert refused.status == "error" and record.task_id in refused.error and "cancel" in refused.error
    assert jobs.status(with_history=False).is_training_running is False
    tasks.cancel()
    assert tasks.wait(10)
    assert jobs.start(TaskRequest).status == "queued"
    with pytest.raises(TaskRefused) as busy:
        tasks.start(TaskKind.export, choice, {}, fake_task_workers.writing_task)
    assert busy.value.status == 409 and "training job is running" in str(busy.value)
    with pytest.raises(TaskRefused) as resolving:  # busy is said before the model or its data is looked at
        tasks.resolve("job-1")
    assert resolving.value.status == 409


def test_a_start_arriving_between_a_tasks_check_and_its_claim_is_refused(setup, monkeypatch) -> None:
    """The task's check (no job runs) and its claim of the machine are one step for Start."""
    import threading

    from trainer_core.schemas import TrainingStartRequest

    tasks, jobs, choice, _ = setup
    checked, original = threading.Event(), TaskRunner._refuse_if_busy

    def slow_check(self):
        original(self)
        checked.set()
        time.sleep(0.5)  # a Start now arrives before the claim

    monkeypatch.setattr(TaskRunner, "_refuse_if_busy", slow_check)
    started = []
    thread = threading.Thread(
        target=lambda: started.append(tasks.start(TaskKind.evaluate, choice, {}, fake_task_workers.slow_task))
    )
    thread.start()
    assert checked.wait(10)
    refused = jobs.start(TrainingStartRequest(local_datasets=["x.json"]))
    thread.join(10)
    assert started and refused.status == "error" and started[0].task_id in refused.error, refused
    assert jobs.status(with_history=False).is_training_running is False


def test_tasks_left_running_by_a_dead_app_are_marked_failed(setup) -> None:
    tasks, _, choice, _ = setup
    record = tasks.start(TaskKind.evaluate, choice, {}, fake_task_workers.slow_task)
    other = TaskStore(tasks.settings.db_path)  # what the next app process finds
    assert other.get(record.task_id).phase == TaskPhase.running
    deadline = time.monotonic() + 20
    while not Path(record.output_dir, "partial.bin").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path(record.output_dir, "partial.bin").is_file()
    assert other.mark_interrupted() == 1
    marked = other.get(record.task_id)
    assert marked.phase == TaskPhase.failed and marked.finished_at is not None
    assert marked.message == "Failed: the app stopped while this task ran" and not Path(record.output_dir).exists()
