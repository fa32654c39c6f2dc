"""How workers start (trainer_core.process.context): forked from a forkserver that has already
imported the training stack on a Linux machine without a GPU, else spawned; a forked worker runs
with the app's environment of the moment, not the forkserver's."""

from __future__ import annotations

import os
import sys

import psutil
import pytest

from trainer_core.process import context
from trainer_core.process.supervisor import WorkerProcess

LINGER = "STUDIO_TEST_WORKER_LINGER_S"
PROBE = "STUDIO_TEST_WORKER_PROBE"


def report_environment(events, stop) -> None:
    """Worker target: what this worker sees of the app's environment, and what it had imported before it started."""
    events.put(
        ("seen", {"probe": os.environ.get(PROBE), "preloaded": "transformers" in sys.modules, "pid": os.getpid()})
    )
    stop.wait(float(os.environ.get(LINGER, "0")))  # a while alive, to be listed (or not)


def _seen(name: str = "probe") -> dict:
    worker = WorkerProcess.create(report_environment, name=name)
    worker.start()
    try:
        kind, payload = worker.next_event(120)
        assert kind == "seen"
        return payload
    finally:
        worker.join(10)


def test_the_start_method_follows_the_machine_and_the_override(monkeypatch):
    monkeypatch.delenv(context.START_ENV, raising=False)
    expected = "forkserver" if sys.platform.startswith("linux") and not context.has_gpu_device() else "spawn"
    assert context.start_method() == expected
    monkeypatch.setattr(context, "has_gpu_device", lambda: True)
    assert context.start_method() == "spawn"  # a GPU: the stack's imports may touch CUDA before a fork
    monkeypatch.setenv(context.START_ENV, "forkserver")
    assert context.start_method() == "forkserver"
    monkeypatch.setenv(context.START_ENV, "fork")
    with pytest.raises(ValueError, match="STUDIO_WORKER_START must be spawn or forkserver"):
        context.start_method()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forkserver is used on Linux only")
def test_a_forked_worker_has_the_stack_imported_and_the_apps_environment_of_now(monkeypatch):
    monkeypatch.delenv(context.START_ENV, raising=False)
    monkeypatch.setattr(context, "has_gpu_device", lambda: False)
    monkeypatch.setenv(PROBE, "first")
    first = _seen()
    monkeypatch.setenv(PROBE, "second")  # after the forkserver started with "first"
    second = _seen()
    assert (first["probe"], second["probe"]) == ("first", "second")
    assert first["preloaded"] and second["preloaded"]  # forked from the server that imported the stack
    listed = {p.pid for p in context.worker_processes(os.getpid())}  # this process's other workers may live
    assert first["pid"] not in listed and second["pid"] not in listed  # both ended
    forkserver = [p for p in psutil.Process().children() if "multiprocessing.forkserver" in " ".join(p.cmdline())]
    assert forkserver and not {p.pid for p in forkserver} & listed  # the forkserver itself is not a worker


FIRST_FORK = """
import time
from trainer_core.process import context
from trainer_core.process.supervisor import WorkerProcess
from tests.trainer_core.process.test_context import report_environment

began = time.monotonic()
print("at-once", context.wait_until_ready(timeout_s=0.1), round(time.monotonic() - began, 2))
print("ready", context.wait_until_ready())
began = time.monotonic()
worker = WorkerProcess.create(report_environment, name="probe")
worker.start()
kind, payload = worker.next_event(60)
print("first-event-s", round(time.monotonic() - began, 2), payload["preloaded"])
worker.join(10)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forkserver is used on Linux only")
def test_waiting_for_the_first_fork_can_give_up_and_a_worker_then_starts_at_once():
    """In a fresh interpreter: the forkserver is still importing, so a 0.1 s wait gives up in about
    0.1 s (the job runner looks for a Cancel between waits); once ready, a worker's first event
    comes within 2 s."""
    import subprocess

    from tests.conftest import REPO

    env = {k: v for k, v in os.environ.items() if k != context.START_ENV}
    out = subprocess.run(
        [sys.executable, "-c", FIRST_FORK], cwd=REPO, env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()}
    if context.has_gpu_device():
        return  # spawn: nothing to wait for
    assert lines["at-once"][0] == "False" and float(lines["at-once"][1]) < 1.0
    assert lines["ready"] == ["True"]
    assert float(lines["first-event-s"][0]) < 2.0 and lines["first-event-s"][1] == "True"


def test_a_worker_is_named_by_its_job_and_the_checks_helper_is_not_a_jobs_worker(monkeypatch):
    """Each worker takes its name (what ps and top show); ``worker_processes`` lists the workers of
    jobs, not the app's long-lived helpers (the pre-flight check's worker)."""
    monkeypatch.setenv(LINGER, "30")
    workers = {}
    for name in ("worker-job_1", context.SERVICE_WORKERS[0]):
        workers[name] = WorkerProcess.create(report_environment, name=name)
        workers[name].start()
        assert workers[name].next_event(120)[0] == "seen"
    try:
        listed = {p.pid: p.name() for p in context.worker_processes(os.getpid())}
        assert listed.get(workers["worker-job_1"].pid) == "worker-job_1"
        assert workers[context.SERVICE_WORKERS[0]].pid not in listed
        assert psutil.Process(workers[context.SERVICE_WORKERS[0]].pid).name() == context.SERVICE_WORKERS[0]
    finally:
        for worker in workers.values():
            worker.stop.set()
            worker.join(10)
