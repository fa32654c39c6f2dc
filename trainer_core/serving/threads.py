"""Threads for a generation on the CPU, chosen for the load found when it starts.

torch's CPU kernels split each product over ``torch.get_num_threads()`` threads (all cores by
default) and wait for the slowest; on a CPU that other processes keep busy (a training run, other
work) one of those threads is often off its core, and the whole step waits for it. So a generation
takes the cores the other processes leave free, one at least: ``cores - others`` rounded down, where
``others`` is the median of a few readings of the processes ready to run (``/proc/stat``'s
``procs_running``, less this one; the 1-minute load average where there is no such file).
Measured: ``bench/chat_threads.py`` (docs/BENCHMARKS.md, "Chat threads under load").
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PROC_STAT = Path("/proc/stat")
READINGS = 5
READING_GAP_S = 0.01


def others_running() -> float:
    """Processes ready to run besides this one: the median of ``READINGS`` readings of
    ``procs_running`` ``READING_GAP_S`` apart, or the 1-minute load average without ``/proc/stat``."""
    readings = []
    for n in range(READINGS):
        try:
            line = next(x for x in PROC_STAT.read_text().splitlines() if x.startswith("procs_running"))
        except (OSError, StopIteration):
            return os.getloadavg()[0]
        readings.append(max(int(line.split()[1]) - 1, 0))
        if n < READINGS - 1:
            time.sleep(READING_GAP_S)
    return float(statistics.median(readings))


def threads_for(cores: int, others: float) -> int:
    """The threads a generation takes on ``cores`` cores with ``others`` processes ready to run:
    the cores they leave free, at least one."""
    return max(1, min(cores, int(cores - others)))


@contextmanager
def cpu_threads(device: str) -> Iterator[int]:
    """On a CPU, torch's threads set for the load found now (``threads_for``) for the block, and
    put back after it; on a GPU nothing changes. Yields the threads used."""
    import torch

    if device != "cpu":
        yield torch.get_num_threads()
        return
    before = torch.get_num_threads()  # the process's own choice: its cores
    chosen = threads_for(before, others_running())
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(before)
