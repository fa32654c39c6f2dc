"""How workers start (trainer_core.process.context): forked from a forkserver that has already
imported the training stack on a Linux machine without a GPU, else spawned; a forked worker runs
with the app's environment of the moment, not the forkserver's."""

from __future__ import annotations

import os
import sys

import pytest

from trainer_core.process import context
from trainer_core.process.supervisor import WorkerProcess

PROBE = "STUDIO_TEST_WORKER_PROBE"


def report_environment(events, stop) -> None:
    """Worker target: what this worker sees of the app's environment, and what it had imported before it started."""
    events.put(
        ("seen", {"probe": os.environ.get(PROBE), "preloaded": "transformers" in sys.modules, "pid": os.getpid()})
    )


def _seen() -> dict:
    worker = WorkerProcess.create(report_environment, name="probe")
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
    assert context.worker_processes(os.getpid()) == []  # both ended; the forkserver itself is not a worker
