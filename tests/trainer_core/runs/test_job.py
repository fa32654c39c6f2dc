"""The single-job runner: one job at a time, supervision of the worker process, stop / cancel / reset;
honest kill reasons; partial saves cleaned up; which runs and checkpoints can be resumed."""

import json
import threading
import time
from pathlib import Path

import pytest

from tests.support import fake_workers
from trainer_core.process.exit_reason import KillEvidence
from trainer_core.runs.job import JobRunner
from trainer_core.runs.resume import ResumeError, find_resume_target
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.checkpoints import (
    latest_checkpoint,
    publish_files,
    publish_folder,
    remove_partial_saves,
)
from trainer_core.vocabulary import Phase


@pytest.fixture
def request_(tmp_path):
    return TrainingStartRequest(local_datasets=["unused.json"], output_dir=str(tmp_path / "out"))


def _wait_for(predicate, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_twenty_simultaneous_starts_make_exactly_one_job(request_):
    runner = JobRunner(worker_target=fake_workers.stepping_worker)
    barrier = threading.Barrier(20)
    responses = []

    def start():
        barrier.wait()
        responses.append(runner.start(request_))

    threads = [threading.Thread(target=start) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queued = [r for r in responses if r.status == "queued"]
    refused = [r for r in responses if r.status == "error"]
    assert len(queued) == 1 and len(refused) == 19
    assert all("already in progress" in r.message for r in refused)
    assert all(r.job_id == queued[0].job_id for r in refused)
    assert runner.status().job_id == queued[0].job_id
    assert runner.stop(save=False)
    assert runner.wait(10)
    assert runner.status().phase == Phase.stopped
    again = request_.model_copy(update={"output_dir": request_.output_dir + "-2"})  # a run's folder is its own
    assert runner.start(again).status == "queued"  # the lock was released
    runner.stop(save=False)
    runner.wait(10)


def test_progress_flows_into_history_and_stop_saves(request_):
    runner = JobRunner(worker_target=fake_workers.stepping_worker)
    runner.start(request_)
    assert _wait_for(lambda: runner.status().details.get("step", 0) >= 5)
    assert runner.stop(save=True)
    assert runner.wait(10)
    status = runner.status()
    assert status.phase == Phase.stopped and not status.is_training_running
    steps = status.metric_history.steps
    assert steps == sorted(steps) and len(steps) >= 5
    assert status.metric_history.loss[0] == 1.0


def test_killed_worker_is_an_error_and_the_next_start_works(request_):
    runner = JobRunner(worker_target=fake_workers.dying_worker)
    runner.start(request_)
    assert runner.wait(20)
    status = runner.status()
    assert status.phase == Phase.error and not status.is_training_running
    # A plain SIGKILL with memory to spare is not called out-of-memory (exit_reason).
    assert "killed (signal 9) by something outside the studio" in status.error
    assert "ran out of memory" not in status.error and "GB" in status.error
    runner._worker_target = fake_workers.stepping_worker
    assert runner.start(request_.model_copy(update={"output_dir": request_.output_dir + "-2"})).status == "queued"
    runner.stop(save=False)
    runner.wait(10)


def test_cancel_ends_a_stubborn_worker_within_two_seconds(request_):
    runner = JobRunner(worker_target=fake_workers.stubborn_worker)
    runner.start(request_)
    assert _wait_for(lambda: runner._process is not None and runner._process.is_alive())
    time.sleep(0.5)
    began = time.monotonic()
    assert runner.stop(save=False)
    assert runner.wait(5)
    assert time.monotonic() - began < 2.0
    assert runner.status().phase == Phase.stopped
    assert "Cancelled" in runner.status().message


def test_reset_refused_while_running_then_clears(request_):
    runner = JobRunner(worker_target=fake_workers.stepping_worker)
    runner.start(request_)
    assert _wait_for(lambda: runner.status().details.get("step", 0) >= 1)
    assert runner.reset() is False
    runner.stop(save=False)
    runner.wait(10)
    assert runner.reset() is True
    status = runner.status()
    assert status.phase == Phase.idle and status.job_id is None and status.metric_history.steps == []


def test_watchers_wake_on_change(request_):
    runner = JobRunner(worker_target=fake_workers.stepping_worker)
    version = runner.history.version
    runner.start(request_)
    began = time.monotonic()
    assert runner.history.wait_for_change(version, 10) != version
    assert time.monotonic() - began < 5
    runner.stop(save=False)
    runner.wait(10)


def test_reset_ends_a_job_being_cancelled(request_):
    runner = JobRunner(worker_target=fake_workers.stubborn_worker)
    runner.start(request_)
    assert _wait_for(lambda: runner._process is not None and runner._process.is_alive())
    assert runner.reset(end_cancelled=True) is False  # running, no cancel asked: refused
    canceller = threading.Thread(target=runner.stop, kwargs={"save": False})
    canceller.start()
    assert _wait_for(lambda: runner._cancelled)
    assert runner.reset(end_cancelled=True) is True
    canceller.join()
    status = runner.status()
    assert status.phase == Phase.idle and not status.is_training_running


def test_start_hands_the_job_to_a_ready_standby(request_):
    runner = JobRunner(worker_target=fake_workers.pid_worker, warm_modules=("json",))
    assert runner.prewarm() is False  # spawning: not ready yet
    assert _wait_for(runner.prewarm)  # asking again does not spawn another; it becomes ready
    standby_pid = runner._standby.process.pid
    assert runner.start(request_).status == "queued"
    assert runner.wait(10)
    status = runner.status()
    assert status.phase == Phase.completed and status.details["worker_pid"] == standby_pid
    assert runner._standby is None  # used up; the next page load warms a new one


def test_a_standby_times_out_and_start_falls_back_to_a_fresh_worker(request_):
    runner = JobRunner(worker_target=fake_workers.pid_worker, standby_idle_s=1.0, warm_modules=())
    runner.prewarm()
    standby = runner._standby
    assert _wait_for(lambda: not standby.process.is_alive(), timeout_s=15)  # exited by itself
    assert runner.start(request_).status == "queued"
    assert runner.wait(10)
    status = runner.status()
    assert status.phase == Phase.completed and status.details["worker_pid"] != standby.process.pid


def test_no_standby_while_a_job_runs(request_):
    runner = JobRunner(worker_target=fake_workers.stepping_worker, warm_modules=())
    runner.start(request_)
    assert runner.prewarm() is False and runner._standby is None
    runner.stop(save=False)
    assert runner.wait(10)


# ----- kill reasons: out of memory only on evidence -----
GiB = 2**30


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _evidence(kills, memory, clock):
    """KillEvidence over scripted readings: ``kills`` and ``memory`` are lists consumed in order."""
    return KillEvidence(oom_kills=lambda: kills.pop(0), memory=lambda: memory.pop(0), clock=clock)


def test_sigkill_is_out_of_memory_when_the_cgroup_counter_rose():
    clock = _Clock()
    evidence = _evidence([3, 4], [(20 * GiB, 24 * GiB)], clock)
    evidence.sample()
    reason = evidence.reason(-9)
    assert "ran out of memory" in reason and "out-of-memory killer ended 1 process" in reason
    assert "batch_size" in reason


def test_sigkill_is_out_of_memory_when_memory_ran_low_just_before():
    clock = _Clock()
    readings = [(20 * GiB, 24 * GiB), (10 * GiB, 24 * GiB), (int(0.2 * GiB), 24 * GiB)]
    evidence = _evidence([None, None], list(readings), clock)  # no readable counter
    for _ in readings:
        evidence.sample()
        evidence.sample()  # under 0.5 s later: not read again
        clock.now += 0.6
    reason = evidence.reason(-9)
    assert "ran out of memory" in reason and "fallen to 0.21 GB of 25.8 GB" in reason


def test_sigkill_is_from_outside_when_memory_was_plentiful_or_low_only_long_before():
    clock = _Clock()
    evidence = _evidence([0, 0], [(int(0.1 * GiB), 24 * GiB), (20 * GiB, 24 * GiB)], clock)
    evidence.sample()  # low, but 10 s before the death: not evidence
    clock.now += 10
    evidence.sample()
    reason = evidence.reason(-9)
    assert reason.startswith("The training worker was killed (signal 9) by something outside the studio")
    assert "no out-of-memory kill was recorded" in reason and "21.5 GB of 25.8 GB" in reason
    assert "memory" not in _evidence([None], [], clock).reason(-15).lower()  # other signals: no OOM talk
    assert "signal 15 (SIGTERM)" in _evidence([None], [], clock).reason(-15)
    assert "exit code 1" in _evidence([None], [], clock).reason(1)


def test_oom_kill_counter_is_read_from_cgroup_v2_or_v1_files(tmp_path, monkeypatch):
    from trainer_core.process import exit_reason

    v2, v1 = tmp_path / "memory.events", tmp_path / "memory.oom_control"
    v2.write_text("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n")
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    monkeypatch.setattr(exit_reason, "_counter_files", lambda: [tmp_path / "missing", v2, v1])
    assert exit_reason.read_oom_kills() == 2
    monkeypatch.setattr(exit_reason, "_counter_files", lambda: [v1])
    assert exit_reason.read_oom_kills() == 5
    monkeypatch.setattr(exit_reason, "_counter_files", lambda: [tmp_path / "missing"])
    assert exit_reason.read_oom_kills() is None


# ----- partial saves and the cancel message -----
def test_cancel_names_the_last_checkpoint_and_partial_saves_are_removed(request_):
    runner = JobRunner(worker_target=fake_workers.saving_worker)
    out = Path(request_.output_dir)
    runner.start(request_)
    assert _wait_for(lambda: runner.status().phase == Phase.training)
    assert (out / ".partial-checkpoint-3").is_dir()  # a save in progress when the cancel comes
    assert runner.stop(save=False) and runner.wait(10)
    status = runner.status()
    assert status.phase == Phase.stopped
    assert status.message == "Cancelled; nothing more was saved (last checkpoint: checkpoint-2)."
    assert status.details["last_checkpoint"] == str(out / "checkpoint-2")
    assert _wait_for(lambda: not (out / ".partial-checkpoint-3").exists())  # removed once the worker ended
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()


def test_cancel_before_any_checkpoint_says_nothing_was_saved(request_):
    runner = JobRunner(worker_target=fake_workers.stubborn_worker)
    runner.start(request_)
    assert _wait_for(lambda: runner._process is not None and runner._process.is_alive())
    assert runner.stop(save=False) and runner.wait(10)
    assert runner.status().message == "Cancelled; nothing was saved."


# ----- checkpoint folders: published whole; which can be resumed -----
def _checkpoint(folder, step, complete=True):
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "adapter_model.safetensors").write_bytes(b"weights")
    if complete:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


def test_latest_checkpoint_skips_staging_and_incomplete_folders(tmp_path):
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 4, complete=False)  # written by a version without staging, then killed
    _checkpoint(tmp_path / ".partial-checkpoint-6", 6)  # complete in staging, not yet renamed
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    assert remove_partial_saves(tmp_path) == [".partial-checkpoint-6"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    assert remove_partial_saves(tmp_path / "missing") == []


def test_publish_replaces_a_redone_step_and_moves_final_files(tmp_path):
    old = _checkpoint(tmp_path, 3)
    staged = _checkpoint(tmp_path / ".partial-checkpoint-3", 3)
    (staged / "trainer_state.json").write_text(json.dumps({"global_step": 3, "redone": True}))
    publish_folder(staged, old)
    assert json.loads((old / "trainer_state.json").read_text())["redone"]
    remove_partial_saves(tmp_path)
    final = tmp_path / ".partial-final"
    final.mkdir()
    (final / "adapter_model.safetensors").write_bytes(b"new")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"old")
    publish_files(final, tmp_path)
    assert (tmp_path / "adapter_model.safetensors").read_bytes() == b"new" and not final.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter_model.safetensors", "checkpoint-3"]


def test_a_failed_run_resumes_from_its_last_complete_checkpoint(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    run_dir, empty_dir, done_dir = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for job_id, folder, phase in (
        ("job_a", run_dir, "error"),
        ("job_b", empty_dir, "error"),
        ("job_c", done_dir, "completed"),
    ):
        store.create_run(job_id, {}, str(folder), "training")
        store.finish_run(job_id, phase, "Training diverged at step 3: grad_norm is nan.", None)
    _checkpoint(run_dir, 2)
    _checkpoint(run_dir / ".partial-checkpoint-3", 3)  # the save the divergence interrupted
    target = find_resume_target(store, str(run_dir / "checkpoint-2"))
    assert (target.run.job_id, target.step, target.run.phase) == ("job_a", 2, Phase.error)
    with pytest.raises(
        ResumeError, match=r"is not a complete checkpoint .*last complete checkpoint of run job_a is .*checkpoint-2$"
    ):
        find_resume_target(store, str(run_dir))  # the run's folder, not a checkpoint
    with pytest.raises(ResumeError, match=r"not a complete checkpoint"):
        find_resume_target(store, str(run_dir / ".partial-checkpoint-3"))
    empty_dir.mkdir()
    with pytest.raises(
        ResumeError, match=r"run job_b \(error\) saved no complete checkpoint, so there is nothing to resume"
    ):
        find_resume_target(store, str(empty_dir / "checkpoint-3"))
    _checkpoint(done_dir, 5)
    with pytest.raises(
        ResumeError, match=r"run job_c is completed; only stopped, interrupted or error runs can be resumed"
    ):
        find_resume_target(store, str(done_dir / "checkpoint-5"))


def test_before_start_runs_once_per_accepted_start_before_the_worker_spawns(request_):
    runner = JobRunner(worker_target=fake_workers.stepping_worker)
    calls = []
    runner.before_start = lambda: calls.append((runner._process, runner.status(with_history=False).is_training_running))
    assert runner.start(request_).status == "queued"
    assert runner.start(request_).status == "error"  # refused: the hook is not called again
    assert calls == [(None, True)]  # no worker yet; chat already sees a running job
    runner.stop(save=False)
    assert runner.wait(10)


def test_a_failing_before_start_hook_does_not_stop_the_job(request_):
    runner = JobRunner(worker_target=fake_workers.pid_worker)

    def broken():
        raise RuntimeError("unload failed")

    runner.before_start = broken
    assert runner.start(request_).status == "queued"
    assert runner.wait(10)
    assert runner.status().phase == Phase.completed


# ----- training time vs wall time across a resume; why a job ended -----
def test_resume_continues_training_time_and_wall_time_includes_the_gap(request_, tmp_path):
    store = RunStore(tmp_path / "studio.db")
    runner = JobRunner(worker_target=fake_workers.checkpointing_worker, store=store, warm_modules=())
    job_id = runner.start(request_).job_id
    assert _wait_for(lambda: runner.status(with_history=False).details.get("step", 0) >= 4)
    assert runner.stop(save=True) and runner.wait(10)
    first = runner.status(with_history=False)
    assert first.phase == Phase.stopped and first.details["end_reason"] == "stopped"
    stopped_at, trained = first.details["step"], first.details["elapsed_seconds"]
    assert store.get_run(job_id).end_reason == "stopped"
    assert store.get_run(job_id).training_seconds == pytest.approx(trained)
    gap_s = 1.5
    time.sleep(gap_s)  # idle between Stop and Resume
    resume = request_.model_copy(
        update={"resume_from_checkpoint": str(Path(request_.output_dir) / f"checkpoint-{stopped_at}")}
    )
    assert runner.start(resume).job_id == job_id
    assert runner.status(with_history=False).details.get("end_reason") is None  # reset when it reopens
    assert store.get_run(job_id).end_reason is None
    assert _wait_for(lambda: runner.status(with_history=False).details.get("step", 0) >= stopped_at + 3)
    assert runner.stop(save=False) and runner.wait(10)
    status = runner.status(with_history=False)
    assert status.details["end_reason"] == "cancelled"
    resumed = [e for e in runner.history.events(after_step=stopped_at) if e.loss is not None]
    assert resumed[0].elapsed_seconds > trained  # continued, not restarted at 0
    assert resumed[0].elapsed_seconds == pytest.approx(trained + 0.05, abs=0.04)  # plus one 50 ms step
    run = store.get_run(job_id)
    assert run.end_reason == "cancelled" and run.training_seconds == pytest.approx(resumed[-1].elapsed_seconds)
    assert run.wall_seconds == run.duration_seconds >= run.training_seconds + gap_s  # the gap is wall time only
    assert status.details["wall_seconds"] >= status.details["elapsed_seconds"] + gap_s
    assert status.details["started_at"] == run.created_at
    expected = (resumed[-1].num_tokens - resumed[0].num_tokens) / (
        resumed[-1].elapsed_seconds - resumed[0].elapsed_seconds
    )
    assert status.details["tokens_per_second"] == pytest.approx(expected)  # this session's rate (~200/s)
    assert run.tokens_per_second == pytest.approx(resumed[-1].num_tokens / resumed[-1].elapsed_seconds)


def test_wall_seconds_runs_while_live_and_stops_at_the_end(request_):
    runner = JobRunner(worker_target=fake_workers.checkpointing_worker, warm_modules=())
    runner.start(request_)
    assert _wait_for(lambda: runner.status(with_history=False).details.get("step", 0) >= 1)
    assert runner.status(with_history=False).details["tokens_per_second"] is None  # one step: no rate yet
    live = runner.status(with_history=False).details["wall_seconds"]
    time.sleep(0.3)
    assert runner.status(with_history=False).details["wall_seconds"] >= live + 0.3
    assert runner.stop(save=False) and runner.wait(10)
    ended = runner.status(with_history=False).details["wall_seconds"]
    time.sleep(0.2)
    assert runner.status(with_history=False).details["wall_seconds"] == ended


def test_cancel_before_the_worker_started_is_cancelled(request_, tmp_path):
    store = RunStore(tmp_path / "studio.db")
    runner = JobRunner(worker_target=fake_workers.stepping_worker, store=store, warm_modules=())
    runner.before_start = lambda: runner.stop(save=False)  # called after the job is accepted, before the spawn
    job_id = runner.start(request_).job_id
    assert runner.wait(10)
    status = runner.status(with_history=False)
    assert status.message == "Cancelled before the worker started."
    assert (status.phase, status.details["end_reason"]) == (Phase.stopped, "cancelled")
    assert store.get_run(job_id).end_reason == "cancelled"


def test_end_reasons_of_completed_and_failed_jobs(request_):
    runner = JobRunner(worker_target=fake_workers.pid_worker, warm_modules=())
    runner.start(request_)
    assert runner.wait(10) and runner.status().details["end_reason"] == "completed"
    runner._worker_target = fake_workers.dying_worker
    runner.start(request_.model_copy(update={"output_dir": request_.output_dir + "-2"}))
    assert runner.wait(20) and runner.status().details["end_reason"] == "error"
    assert runner.reset() and "end_reason" not in runner.status().details
