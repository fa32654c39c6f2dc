"""Ending a launched group's processes: the launcher and every training process it started, each
signalled by pid (they run in sessions of their own, and a process whose launcher died is no
longer its child)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable

import psutil


def descendants(launcher: subprocess.Popen, pids: Iterable[int]) -> list[psutil.Process]:
    """The launcher's live descendants, plus the processes named by ``pids`` (the ranks' own pids,
    which outlive their launcher's parenthood when it dies first)."""
    found: dict[int, psutil.Process] = {}
    try:
        for proc in psutil.Process(launcher.pid).children(recursive=True):
            found[proc.pid] = proc
    except psutil.Error:
        pass
    for pid in list(pids):
        try:
            found.setdefault(pid, psutil.Process(pid))
        except psutil.Error:
            pass
    return list(found.values())


def end_processes(launcher: subprocess.Popen, pids: Iterable[int], grace_s: float) -> None:
    """SIGTERM the launcher and every process of its group (``descendants``), SIGKILL what is left
    after ``grace_s`` s, and wait (about a second more) for them to be gone."""
    others = descendants(launcher, pids)
    for proc in others:
        signal(proc, "terminate")
    if launcher.poll() is None:
        launcher.terminate()
    deadline = time.monotonic() + grace_s
    _, alive = psutil.wait_procs(others, timeout=grace_s)
    for proc in alive:
        signal(proc, "kill")
    _wait(launcher, max(0.0, deadline - time.monotonic()))
    if launcher.poll() is None:
        launcher.kill()
        _wait(launcher, 1.0)
    psutil.wait_procs(alive, timeout=1.0)


def signal(proc: psutil.Process, how: str) -> None:
    """``proc.terminate()`` or ``proc.kill()`` (``how``), nothing when it is already gone."""
    try:
        getattr(proc, how)()
    except psutil.Error:
        pass


def _wait(launcher: subprocess.Popen, timeout_s: float) -> None:
    try:
        launcher.wait(timeout_s)
    except subprocess.TimeoutExpired:
        pass
