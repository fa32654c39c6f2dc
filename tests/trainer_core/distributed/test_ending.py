"""ending.end_processes: the launcher, its children and a rank in a session of its own (no longer the
launcher's child) all end; one that ignores SIGTERM is killed after the grace."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from trainer_core.distributed import ending

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"


def test_the_launcher_its_children_and_an_orphaned_rank_all_end():
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {STUBBORN!r}]); time.sleep(60)",
        ],
        start_new_session=True,
    )
    rank = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, start_new_session=True)
    assert rank.stdout.readline().strip() == b"up"  # its SIGTERM handler is set
    deadline = time.monotonic() + 20
    while not psutil.Process(launcher.pid).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = psutil.Process(launcher.pid).children()[0]
    began = time.monotonic()
    ending.end_processes(launcher, [rank.pid], grace_s=0.5)
    took = time.monotonic() - began
    assert 0.5 <= took < 5  # the rank ignored SIGTERM: killed once the grace was over
    assert launcher.poll() is not None
    rank.wait(5)  # (psutil reaped it already: Popen reads no exit code)
    assert not psutil.pid_exists(rank.pid)
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_signal_on_a_process_already_gone_says_nothing():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    handle = psutil.Process(proc.pid)
    proc.wait()
    ending.signal(handle, "kill")
