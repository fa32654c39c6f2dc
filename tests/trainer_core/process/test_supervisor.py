"""The worker-process supervisor shared by training and inference: events out, stop and commands
in, every event of a dead worker handed out before its death is reported, honest exit reasons,
SIGTERM then SIGKILL."""

import os
import signal
import time

import pytest

from trainer_core.process.supervisor import WorkerExited, WorkerProcess


def burst_then_die(count, events, stop):
    """Sends ``count`` events at once, then is SIGKILLed (events still in the pipe)."""
    for i in range(count):
        events.put(("n", {"i": i}))
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)


def commanded(commands, events, stop):
    """Echoes commands until None; reports whether stop was set."""
    while (command := commands.get()) is not None:
        events.put(("echo", {"command": command, "stopped": stop.is_set()}))


def ignores_sigterm(events, stop):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    events.put(("up", {}))
    time.sleep(600)


def exits_with(code, events, stop):
    events.put(("bye", {}))
    raise SystemExit(code)


def _events_until_exit(worker, timeout_s=20):
    seen, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            event = worker.next_event(0.05)
        except WorkerExited as exited:
            return seen, exited
        if event is not None:
            seen.append(event)
    pytest.fail("the worker did not end")


def test_every_event_of_a_killed_worker_comes_before_its_exit_reason():
    worker = WorkerProcess.create(burst_then_die, (500,), name="t-burst")
    worker.start()
    seen, exited = _events_until_exit(worker)
    assert [payload["i"] for _, payload in seen] == list(range(500))
    assert exited.exitcode == -signal.SIGKILL and not worker.is_alive()
    assert "training worker was killed (signal 9) by something outside the studio" in exited.reason


def test_the_label_and_oom_hint_name_the_worker_in_the_reason():
    worker = WorkerProcess.create(exits_with, (3,), name="t-exit", label="chat model's process", oom_hint="Smaller.")
    worker.start()
    seen, exited = _events_until_exit(worker)
    assert seen == [("bye", {})]
    assert exited.exitcode == 3 and exited.reason == "The chat model's process exited unexpectedly (exit code 3)."


def test_commands_reach_a_long_lived_worker_and_close_ends_it():
    worker = WorkerProcess.create(commanded, name="t-cmd", commands=True)
    worker.start()
    worker.send("a")
    assert worker.next_event(10) == ("echo", {"command": "a", "stopped": False})
    worker.stop.set()
    worker.send({"b": 1})
    assert worker.next_event(10) == ("echo", {"command": {"b": 1}, "stopped": True})
    worker.close()
    assert not worker.is_alive() and worker.exitcode == 0


def test_a_worker_without_commands_refuses_send():
    worker = WorkerProcess.create(exits_with, (0,), name="t-nocmd")
    with pytest.raises(RuntimeError, match="takes no commands"):
        worker.send("x")
    worker.terminate()  # never started: nothing to do
    assert worker.pid is None


def test_terminate_kills_a_worker_that_ignores_sigterm_after_the_grace():
    worker = WorkerProcess.create(ignores_sigterm, name="t-stubborn")
    worker.start()
    assert worker.next_event(20) == ("up", {})
    began = time.monotonic()
    worker.terminate(grace_s=0.3)
    assert not worker.is_alive() and worker.exitcode == -signal.SIGKILL
    assert time.monotonic() - began < 2.0
