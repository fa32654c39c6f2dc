"""Why a worker process (training or inference) died, said only as far as the evidence goes.

A SIGKILL is called out-of-memory only when the kernel says so (the cgroup's ``oom_kill`` counter
rose while the worker ran) or the machine was nearly out of memory in the seconds before the death
(``psutil.virtual_memory().available`` sampled by the job thread). Any other SIGKILL came from
outside the studio (a user's ``kill -9``, a process manager, a container runtime).
"""

from __future__ import annotations

import signal
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Optional

CGROUP_ROOT = Path("/sys/fs/cgroup")
SAMPLE_EVERY_S = 0.5  # how often available memory is read while the worker runs
WINDOW_S = 5.0  # samples this close to the death count as "just before" it
LOW_FRACTION = 0.05  # available memory at or under this share of the total is "nearly out"...
LOW_BYTES = 300 * 2**20  # ...or at or under this many bytes, whichever is larger
GB = 1e9
TRAINING_OOM_HINT = "Try a smaller batch_size or max_seq_length, or qlora."


def _counter_files() -> list[Path]:
    """Where this process's cgroup keeps its OOM-kill counter: cgroup v2 ``memory.events``, v1
    ``memory.oom_control``; our own cgroup's folder first, then the mount's root (in a container)."""
    files = []
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            files.append(CGROUP_ROOT / path.lstrip("/") / "memory.events")
        elif "memory" in controllers.split(","):
            files.append(CGROUP_ROOT / "memory" / path.lstrip("/") / "memory.oom_control")
    return files + [CGROUP_ROOT / "memory.events", CGROUP_ROOT / "memory" / "memory.oom_control"]


def read_oom_kills() -> Optional[int]:
    """The cgroup's count of processes killed by the OOM killer (the ``oom_kill N`` line), or None
    where no counter is readable (not Linux, no memory controller, older kernels)."""
    for path in _counter_files():
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def read_memory() -> tuple[int, int]:
    """(available, total) memory of the machine in bytes."""
    import psutil

    memory = psutil.virtual_memory()
    return int(memory.available), int(memory.total)


class KillEvidence:
    """Readings taken while one worker runs: create it when the worker starts, call ``sample`` often
    (it reads memory at most every ``SAMPLE_EVERY_S`` seconds), then ``reason`` when it has died."""

    def __init__(
        self,
        oom_kills: Callable[[], Optional[int]] = read_oom_kills,
        memory: Callable[[], tuple[int, int]] = read_memory,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._oom_kills, self._memory, self._clock = oom_kills, memory, clock
        self.kills_at_start = oom_kills()
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=int(WINDOW_S / SAMPLE_EVERY_S) + 2)

    def sample(self) -> None:
        """Record (time s, available B, total B) unless the last reading is under SAMPLE_EVERY_S old."""
        now = self._clock()
        if self._samples and now - self._samples[-1][0] < SAMPLE_EVERY_S:
            return
        self._samples.append((now, *self._memory()))

    def oom_evidence(self) -> Optional[str]:
        """What says the worker was killed for lack of memory, or None when nothing does."""
        kills = self._oom_kills()
        if self.kills_at_start is not None and kills is not None and kills > self.kills_at_start:
            return f"the kernel's out-of-memory killer ended {kills - self.kills_at_start} process(es) in its cgroup meanwhile"
        low = self.lowest_recent()
        if low is not None and low[0] <= max(LOW_FRACTION * low[1], LOW_BYTES):
            return f"available memory had fallen to {low[0] / GB:.2f} GB of {low[1] / GB:.1f} GB"
        return None

    def lowest_recent(self) -> Optional[tuple[int, int]]:
        """(available, total) bytes of the sample with the least available memory in the last
        WINDOW_S seconds, or None without such samples."""
        now = self._clock()
        recent = [(available, total) for t, available, total in self._samples if now - t <= WINDOW_S]
        return min(recent) if recent else None

    def reason(self, exitcode: Optional[int], worker: str = "training worker", oom_hint: Optional[str] = None) -> str:
        """The user's explanation of a ``worker`` (its name in the message) that ended with
        ``exitcode`` without a final event (negative: killed by that signal, as ``multiprocessing``
        reports it). ``oom_hint`` is what to try after an out-of-memory kill (default: training's)."""
        if exitcode is None or exitcode >= 0:
            return f"The {worker} exited unexpectedly (exit code {exitcode})."
        number = -exitcode
        if number != signal.SIGKILL:
            return f"The {worker} was killed by signal {number} ({_signal_name(number)}); see worker.log."
        if (evidence := self.oom_evidence()) is not None:
            return f"The {worker} was killed (signal 9) because it ran out of memory: {evidence}. {oom_hint or TRAINING_OOM_HINT}"
        return (
            f"The {worker} was killed (signal 9) by something outside the studio (a user, a process "
            f"manager or a container runtime): {self._no_oom_note()}."
        )

    def _no_oom_note(self) -> str:
        low = self.lowest_recent()
        counter = "no out-of-memory kill was recorded"
        if self.kills_at_start is None:
            counter = "no OOM-kill counter is readable"
        if low is None:
            return f"{counter}, and memory was not sampled"
        return f"{counter}, and at least {low[0] / GB:.1f} GB of {low[1] / GB:.1f} GB was available in its last seconds"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
