"""The single-job runner: one job at a time, supervision of the worker process, stop / cancel / reset."""

import threading
import time

import pytest

from tests import fake_workers
from trainer_core.job import JobRunner
from trainer_core.schemas import Phase, TrainingStartRequest


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
    assert runner.start(request_).status == "queued"  # the lock was released
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
    assert "killed by signal 9" in status.error and "memory" in status.error
    runner._worker_target = fake_workers.stepping_worker
    assert runner.start(request_).status == "queued"
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
