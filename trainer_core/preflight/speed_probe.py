"""This machine's matmul rate for the time estimate, measured so that two Checks agree: the probe is
``PROBE_RUNS`` short runs of back-to-back ``torch.mm`` products (``RUN_SECONDS`` each), its rate
the median run and its spread the slowest and fastest run; it is kept per machine (the device,
host, CPU model, core and thread counts) in ``<data dir>/machine_speed.json`` and reused for
``KEEP_DAYS``. Other work on the machine only lowers a probe, so a later probe replaces the kept one
only when it is faster (or the kept one is older than ``KEEP_DAYS``), and at most once per
``REPROBE_S``. ``cpu_load`` names the load when it is high: "the CPU is busy: 7 processes ready to
run on 2 cores"."""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, Field

from trainer_core.preflight.memory import dtype_bytes

log = logging.getLogger(__name__)

PROBE_RUNS = 5
RUN_SECONDS = 0.06  # each run: as many 1024-square products as fit (about 0.3 s in all, as before)
SIZE = 1024
REPROBE_S = 600.0  # a new probe at most this often per process (one that is faster replaces the kept one)
KEEP_DAYS = 7.0  # a kept probe older than this is replaced by the next one, faster or not
NOISY_SPREAD = 0.2  # (fastest - slowest run) / median above this: the estimate is a range
BUSY_LOAD = 1.0  # processes ready to run per core above this: the load is named
CACHE_FILE = "machine_speed.json"


class MachineSpeed(BaseModel):
    """A probe's result: the median run's rate and the slowest and fastest run's, in GFLOP/s."""

    gflops: float
    low_gflops: float
    high_gflops: float
    runs: int
    measured_at: float = Field(description="Unix time of the probe.")

    @property
    def noisy(self) -> bool:
        """True when the runs spread over more than ``NOISY_SPREAD`` of the median."""
        return (self.high_gflops - self.low_gflops) / max(self.gflops, 1e-9) > NOISY_SPREAD

    def described(self, now: Optional[float] = None) -> str:
        """ "82 GFLOP/s (median of 5 runs, 78-85; probed 3 min ago)"."""
        age = max((now or time.time()) - self.measured_at, 0.0)
        ago = "just now" if age < 60 else f"{age / 60:.0f} min ago" if age < 3600 else f"{age / 3600:.1f} h ago"
        return (
            f"{self.gflops:.0f} GFLOP/s (median of {self.runs} short runs, {self.low_gflops:.0f}-"
            f"{self.high_gflops:.0f}; probed {ago})"
        )


def probe(device: str, runs: int = PROBE_RUNS, run_seconds: float = RUN_SECONDS) -> MachineSpeed:
    """``runs`` timed runs of ``SIZE``-square ``torch.mm`` products in ``device``'s compute dtype,
    after one warm-up product."""
    import torch

    dtype = torch.float32 if dtype_bytes(device) == 4 else torch.bfloat16
    target = "cuda" if device == "cuda" else "cpu"
    a, b = (torch.randn(SIZE, SIZE, dtype=dtype, device=target) for _ in range(2))
    sync = torch.cuda.synchronize if target == "cuda" else (lambda: None)
    torch.mm(a, b)
    sync()
    rates = []
    for _ in range(runs):
        count, began = 0, time.perf_counter()
        while count == 0 or time.perf_counter() - began < run_seconds:
            torch.mm(a, b)
            sync()
            count += 1
        rates.append(2 * SIZE**3 * count / (time.perf_counter() - began) / 1e9)
    return MachineSpeed(
        gflops=statistics.median(rates),
        low_gflops=min(rates),
        high_gflops=max(rates),
        runs=runs,
        measured_at=time.time(),
    )


def machine_key(device: str) -> str:
    """What the kept probe belongs to: the device, host, CPU model, cores and torch's threads."""
    try:
        import torch

        threads = torch.get_num_threads()
    except ImportError:
        threads = 0
    return f"{device}|{platform.node()}|{platform.processor() or platform.machine()}|{os.cpu_count()}|{threads}"


class SpeedCache:
    """The kept probes (``CACHE_FILE`` in ``folder``; in memory only without one) and when this
    process last probed; ``measure``: the probe (``probe``, replaced in tests)."""

    def __init__(self, measure: Callable[[str], MachineSpeed] = probe) -> None:
        self.measure = measure
        self._lock = threading.Lock()
        self._memory: dict[str, MachineSpeed] = {}
        self._probed: dict[str, float] = {}  # key -> monotonic time of this process's last probe

    def speed(self, device: str, folder: Optional[Path] = None) -> MachineSpeed:
        """The kept probe of this machine, probing first when there is none, it is older than
        ``KEEP_DAYS``, or this process has not probed for ``REPROBE_S`` (a faster probe replaces it)."""
        key = machine_key(device)
        with self._lock:
            kept = _read(folder).get(key) if folder else None
            kept = kept or self._memory.get(key)
            stale = kept is None or time.time() - kept.measured_at > KEEP_DAYS * 86400
            due = time.monotonic() - self._probed.get(key, -REPROBE_S) >= REPROBE_S
            if stale or due:
                fresh = self.measure(device)
                self._probed[key] = time.monotonic()
                if stale or fresh.gflops > kept.gflops:
                    kept = fresh
                    _write(folder, key, kept)
            self._memory[key] = kept
            return kept


def _read(folder: Path) -> dict[str, MachineSpeed]:
    try:
        data = json.loads((folder / CACHE_FILE).read_text())
        return {key: MachineSpeed(**value) for key, value in data.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError) as exc:  # a damaged file: probed again and rewritten
        log.warning("ignoring %s: %s", folder / CACHE_FILE, exc)
        return {}


def _write(folder: Optional[Path], key: str, speed: MachineSpeed) -> None:
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        data = {k: v.model_dump() for k, v in _read(folder).items()}
        data[key] = speed.model_dump()
        temporary = folder / f".{CACHE_FILE}.{os.getpid()}"
        temporary.write_text(json.dumps(data, indent=1))
        temporary.replace(folder / CACHE_FILE)
    except OSError as exc:  # the estimate still stands; the next Check probes again
        log.warning("could not keep the machine speed in %s: %s", folder, exc)


SPEEDS = SpeedCache()


def cpu_load() -> tuple[float, int]:
    """(processes ready to run, 1-minute average; cores): ``os.getloadavg``, or psutil's
    emulation where the OS has none."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        import psutil

        load = psutil.getloadavg()[0]
    return load, os.cpu_count() or 1


def busy_words(load: float, cores: int) -> Optional[str]:
    """ "the CPU is busy: 7 processes ready to run on 2 cores" when ``load`` is over ``BUSY_LOAD``
    per core, else None."""
    if load <= BUSY_LOAD * cores:
        return None
    return f"the CPU is busy: {load:.0f} processes ready to run on {cores} cores (1-minute average)"


SPEED_PARTS = ("generation", "train_steps", "evaluation")  # the parts that take longer on a slower machine


def time_range(parts: dict[str, float], fast: float, slow: float) -> tuple[Optional[float], Optional[float]]:
    """(fast end, slow end) seconds of a time estimate's ``parts`` with the speed-bound ones (``SPEED_PARTS``) times
    ``fast`` and ``slow``; (None, None) when both ends are within 2 % of the point."""
    fixed = sum(v for name, v in parts.items() if name not in SPEED_PARTS)
    varying = sum(v for name, v in parts.items() if name in SPEED_PARTS)
    if varying * (slow - fast) <= 0.02 * (fixed + varying):
        return None, None
    return round(fixed + varying * fast, 1), round(fixed + varying * slow, 1)
