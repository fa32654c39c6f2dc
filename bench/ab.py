"""A B speed runs shared by the benches that set our training path against a bare script
(``bench.embedding``, ``bench.speech``): each side in a fresh process with ``--threads`` torch
threads, only ``trainer.train()`` timed, and each step's end stamped (wall and CPU clock), so that
the median step after the first (the figure least moved by other work on the machine, with one
thread per side) is reported beside samples / s of the whole ``train()``; then A B A B summed up.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]


class LossLog:
    """A ``TrainerCallback`` (built lazily) collecting the logged training losses and the
    ``perf_counter`` and ``process_time`` at each step's end (``ends``: (wall, CPU) seconds)."""

    @staticmethod
    def make(sink: list[float], ends: list[tuple[float, float]]) -> Any:
        from transformers import TrainerCallback

        class Callback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "loss" in logs:
                    sink.append(logs["loss"])

            def on_step_end(self, args, state, control, **kwargs):
                ends.append((time.perf_counter(), time.process_time()))

        return Callback()


def torch_threads() -> int:
    """torch's intra-op threads in this process."""
    import torch

    return torch.get_num_threads()


def timed_train(
    trainer: Any, steps: int, batch_size: int, losses: list[float], ends: list[tuple[float, float]]
) -> dict[str, Any]:
    """Run ``trainer.train()`` (its callbacks: a ``LossLog`` filling ``losses`` and ``ends``) and
    return its figures: seconds of ``train()``, samples / s of it and at steady state (from the
    first step's end to the last's), the median step after the first in ms of wall and of this
    process's CPU time (all its threads), the mean and each logged loss."""
    began = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - began
    walls = [wall for wall, _ in ends]
    gaps = [b - a for a, b in zip(walls, walls[1:])]  # each step after the first, s
    cpu = [b[1] - a[1] for a, b in zip(ends, ends[1:])]
    steady = len(gaps) * batch_size / (walls[-1] - walls[0]) if gaps else None
    return {
        "threads": torch_threads(),
        "median_step_ms": round(1000 * statistics.median(gaps), 2) if gaps else None,
        "median_step_cpu_ms": round(1000 * statistics.median(cpu), 2) if cpu else None,
        "seconds": round(seconds, 2),
        "samples_per_s": round(steps * batch_size / seconds, 2),
        "steady_samples_per_s": round(steady, 2) if steady else None,
        "mean_loss": round(statistics.fmean(losses), 4) if losses else None,
        "losses": [round(x, 4) for x in losses],
    }


def spawn(module: str, argv: list[str], threads: Optional[int], timeout: float = 3600) -> dict[str, Any]:
    """``python -m module *argv [--threads N]`` in the repository; its last stdout line as JSON.
    Raises RuntimeError with the end of its stderr when it fails."""
    given = ["--threads", str(threads)] if threads else []
    done = subprocess.run(
        [sys.executable, "-m", module, *argv, *given], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(argv)} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(runs: list[dict[str, Any]], sides: tuple[str, str] = ("ours", "bare")) -> dict[str, Any]:
    """Per side of ``runs`` (each with ``side`` and ``timed_train``'s figures): the median samples / s
    and each run's figures; ``ratio`` (ours / bare samples / s), ``step_ratio`` and
    ``step_cpu_ratio`` (bare's median step / ours: > 1, ours steps faster) and ``loss_gap`` (of the
    first runs' mean losses)."""
    found: dict[str, Any] = {}
    for which in sides:
        mine = [r for r in runs if r["side"] == which]
        found[which] = {
            "median_samples_per_s": round(statistics.median(r["samples_per_s"] for r in mine), 3),
            **{key: [r[key] for r in mine] for key in ("samples_per_s", "steady_samples_per_s", "median_step_ms")},
            "median_step_cpu_ms": [r["median_step_cpu_ms"] for r in mine],
            "mean_loss": mine[0]["mean_loss"],
        }
    ours, bare = (found[which] for which in sides)
    found["ratio"] = round(ours["median_samples_per_s"] / bare["median_samples_per_s"], 3)
    for key, name in (("median_step_ms", "step_ratio"), ("median_step_cpu_ms", "step_cpu_ratio")):
        if all(ours[key]) and all(bare[key]):
            found[name] = round(statistics.median(bare[key]) / statistics.median(ours[key]), 3)
    if ours["mean_loss"] is not None and bare["mean_loss"] is not None:
        found["loss_gap"] = round(abs(ours["mean_loss"] - bare["mean_loss"]), 4)
    return found
