"""A live CPU / RAM / GPU snapshot, without importing torch into the app process."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from typing import Optional

import psutil
from pydantic import BaseModel

GIB = 1024**3


class GpuInfo(BaseModel):
    """One CUDA device; memory in GiB."""

    index: int
    name: str
    memory_used_gib: float
    memory_total_gib: float


class HardwareSnapshot(BaseModel):
    """CPU use in percent (all cores), RAM in GiB, and each visible CUDA device (empty: no GPU)."""

    cpu_percent: float
    cpu_count: int
    ram_used_gib: float
    ram_total_gib: float
    gpus: list[GpuInfo]


def _gpus_from_nvidia_smi() -> Optional[list[GpuInfo]]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in filter(None, out.strip().splitlines()):
        index, name, used, total = (part.strip() for part in line.split(","))
        gpus.append(
            GpuInfo(
                index=int(index), name=name, memory_used_gib=float(used) / 1024, memory_total_gib=float(total) / 1024
            )
        )  # nvidia-smi reports MiB
    return gpus


def _gpus_from_torch() -> list[GpuInfo]:
    """CUDA devices through torch, only if something already paid for importing it. A torch that
    another thread is still importing has no ``cuda`` yet: no GPUs reported this time."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available():
            return []
        gpus = []
        for i in range(cuda.device_count()):
            free, total = cuda.mem_get_info(i)
            gpus.append(
                GpuInfo(
                    index=i,
                    name=cuda.get_device_name(i),
                    memory_used_gib=(total - free) / GIB,
                    memory_total_gib=total / GIB,
                )
            )
        return gpus
    except (AttributeError, RuntimeError):
        return []


def snapshot() -> HardwareSnapshot:
    """Current figures; CPU percent is measured over 0.1 s."""
    memory = psutil.virtual_memory()
    gpus = _gpus_from_nvidia_smi()
    return HardwareSnapshot(
        cpu_percent=psutil.cpu_percent(interval=0.1),
        cpu_count=psutil.cpu_count() or 1,
        ram_used_gib=(memory.total - memory.available) / GIB,
        ram_total_gib=memory.total / GIB,
        gpus=gpus if gpus is not None else _gpus_from_torch(),
    )


_CACHE_LOCK = threading.Lock()
_cached: Optional[tuple[float, HardwareSnapshot]] = None
_cpu_sampled_at: Optional[float] = None  # monotonic time of the last psutil.cpu_percent call
CPU_SAMPLE_STALE_S = 5.0  # an older (or no) previous sample averages over idle time: measure afresh


def cached_snapshot(max_age_s: float = 1.0) -> HardwareSnapshot:
    """``snapshot()`` at most once per ``max_age_s`` seconds for the whole app (every open tab's
    hardware panel polls it), with CPU percent measured since the previous call instead of over a
    blocking 0.1 s, except on the first call and after ``CPU_SAMPLE_STALE_S`` without one: psutil's
    first ``cpu_percent(interval=None)`` is a meaningless 0.0 (psutil docs), and a sample since a
    call minutes ago averages a training job with the idle time before it."""
    global _cached, _cpu_sampled_at
    with _CACHE_LOCK:
        now = time.monotonic()
        if _cached is not None and now - _cached[0] < max_age_s:
            return _cached[1]
        memory = psutil.virtual_memory()
        gpus = _gpus_from_nvidia_smi()
        stale = _cpu_sampled_at is None or now - _cpu_sampled_at > CPU_SAMPLE_STALE_S
        cpu = psutil.cpu_percent(interval=0.1 if stale else None)
        _cpu_sampled_at = time.monotonic()
        snap = HardwareSnapshot(
            cpu_percent=cpu,
            cpu_count=psutil.cpu_count() or 1,
            ram_used_gib=(memory.total - memory.available) / GIB,
            ram_total_gib=memory.total / GIB,
            gpus=gpus if gpus is not None else _gpus_from_torch(),
        )
        _cached = (now, snap)
        return snap
