"""Cost of the Runs tab's comparison: 10 synthetic runs of 10,000 logged steps each (eval every 100
steps, token counts on every step) written into a temporary ``RunStore`` through its own methods,
then overlaid in one figure with smoothing 0.6.

    python -m bench.compare [--quick] [--runs N] [--steps N] [--repeats N] [--x-axis step|tokens]

Measures (ms, min / median / max over the repeats): building the figure from series already loaded
(EMA + downsampling + figure + JSON); the Compare button's own handler
(``ui.compare_panel.compare_runs``: each run's record, its series through the app's shared
``compare.SHARED`` cache, diff table, figure; then ``fig.to_json()``) with that cache emptied first
(cold: the finished runs' packed arrays are read from the store), with it warm (a second look: other
smoothing or x axis), and cold on a database whose runs have no packs yet (runs that ended before
packs existed: each first read packs the run's rows); reading the runs' rows through the lean query
as a live run is read; ``finish_run`` (which packs the run's series) per run; reading the runs
through ``get_run`` (a pydantic model per event) for reference; and the figure's JSON size. Beside
the wall times, each gets this process's median CPU time (``cpu_median``: the work's cost without the
waits for other processes on a shared machine) and the report the load average. Prints one JSON
line, then a summary. Target (issue 13): <= 150 ms and <= 500 KB for 10 runs x 10,000 steps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from trainer_core.runs import compare
from trainer_core.runs.store import RunStore
from trainer_core.status import TrainingProgress
from ui import compare_panel, compare_view

SMOOTHING = 0.6


def fill(store: RunStore, runs: int, steps: int) -> tuple[list[str], list[float]]:
    """``runs`` finished runs of ``steps`` train events (noisy decaying loss, 512 tokens a step)
    plus an eval event every 100 steps, each with its own learning rate; returns their job ids and
    each ``finish_run`` call's wall time (ms; it packs the run's series)."""
    job_ids, finish_ms = [], []
    for r in range(runs):
        job_id = f"job_bench_{r:02d}"
        store.create_run(
            job_id, {"learning_rate": 1e-4 * (r + 1), "max_steps": steps, "lora_r": 16}, f"/runs/{job_id}", "training"
        )
        for step in range(1, steps + 1):
            loss = 2.0 * math.exp(-step / steps * (1 + r / 5)) + 0.2 * math.sin(step * 0.7 + r) + 0.3
            store.add_metric(
                TrainingProgress(
                    job_id=job_id,
                    step=step,
                    total_steps=steps,
                    loss=loss,
                    learning_rate=1e-4,
                    elapsed_seconds=step * 0.1,
                    num_tokens=512 * step,
                )
            )
            if step % 100 == 0:
                store.add_metric(
                    TrainingProgress(
                        job_id=job_id, step=step, total_steps=steps, eval_loss=loss + 0.1, elapsed_seconds=step * 0.1
                    )
                )
        began = time.perf_counter()
        store.finish_run(job_id, "completed", None, None, "completed")
        finish_ms.append((time.perf_counter() - began) * 1000)
        job_ids.append(job_id)
    return job_ids, finish_ms


def _timed(fn: Callable[[], int], repeats: int) -> tuple[dict, int]:
    """``_stats`` of ``repeats`` calls of ``fn`` and the size it returned last (bytes)."""
    wall, cpu, size = [], [], 0
    for _ in range(repeats):
        began, began_cpu = time.perf_counter(), time.process_time()
        size = fn()
        wall.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
    return _stats(wall, cpu), size


def _stats(wall: list[float], cpu: list[float] | None = None) -> dict:
    """min / median / max of wall times (ms), and the median CPU time of this process (ms: what the
    work costs without waiting for the neighbours' processes on a shared machine)."""
    stats = {"min": round(min(wall), 1), "median": round(statistics.median(wall), 1), "max": round(max(wall), 1)}
    if cpu:
        stats["cpu_median"] = round(statistics.median(cpu), 1)
    return stats


def measure(runs: int, steps: int, repeats: int, x_axis: compare.XAxis = "step") -> dict:
    """The figures for one store of ``runs`` (at most ``compare.MAX_RUNS``) x ``steps``."""
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(Path(folder) / "studio.db")
        began = time.perf_counter()
        job_ids, finish_ms = fill(store, runs, steps)
        fill_s = time.perf_counter() - began
        records = [store.get_record(j) for j in job_ids]
        series = compare.load_series(store, records, x_axis)
        ctx = SimpleNamespace(runner=SimpleNamespace(store=store), tasks=None, settings=None)

        def from_series() -> int:
            figure = compare_view.overlay_figure(compare.curves(series, SMOOTHING), x_axis, SMOOTHING)
            return len(figure.to_json())

        def compare_button(cold: bool) -> int:  # what the Runs tab's Compare button runs
            if cold:
                compare.SHARED.clear()
            figure, _ = compare_panel.compare_runs(ctx, job_ids, x_axis, SMOOTHING)
            return len(figure.to_json())

        def unpacked() -> int:  # as a database whose runs ended before packs existed
            with sqlite3.connect(store.path) as other:
                other.execute("DELETE FROM series")
            return compare_button(cold=True)

        def live_rows() -> int:  # the lean query a live run is read with
            return sum(len(compare.series_of(j, j, store.loss_rows(j), x_axis).x) for j in job_ids)

        def full_models() -> int:  # the slow way, for reference: every event through pydantic
            return sum(len(store.get_run(j).metrics) for j in job_ids)

        compare_button(cold=True)
        series_ms, size = _timed(from_series, repeats)
        cold_ms, _ = _timed(lambda: compare_button(cold=True), repeats)
        warm_ms, _ = _timed(lambda: compare_button(cold=False), repeats)
        unpacked_ms, _ = _timed(unpacked, max(1, repeats // 3))
        rows_ms, _ = _timed(live_rows, max(1, repeats // 3))
        pydantic_ms, _ = _timed(full_models, max(1, repeats // 3))
        load_average = [round(v, 2) for v in os.getloadavg()]
        store.close()
    compare.SHARED.clear()
    return {
        "runs": runs,
        "steps": steps,
        "x_axis": x_axis,
        "smoothing": SMOOTHING,
        "fill_s": round(fill_s, 1),
        "figure_from_series_ms": series_ms,
        "figure_from_store_ms": cold_ms,
        "figure_from_store_cached_ms": warm_ms,
        "figure_from_store_unpacked_ms": unpacked_ms,
        "live_rows_read_ms": rows_ms,
        "finish_run_ms": _stats(finish_ms),
        "get_run_pydantic_ms": pydantic_ms,
        "figure_json_kb": round(size / 1024, 1),
        "load_average_1_5_15": load_average,
    }


def main(argv: list[str] | None = None) -> dict:
    """Parse the arguments, measure, print one JSON line and a summary; returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--x-axis", choices=compare.X_AXES, default="step")
    parser.add_argument("--quick", action="store_true", help="2 runs of 1,000 steps, 2 repeats")
    args = parser.parse_args(argv)
    runs, steps, repeats = (2, 1_000, 2) if args.quick else (args.runs, args.steps, args.repeats)
    if not 1 <= runs <= compare.MAX_RUNS:
        parser.error(f"--runs must be from 1 to {compare.MAX_RUNS} (the most one comparison shows)")
    report = {"bench": "compare", **measure(runs, steps, repeats, args.x_axis)}
    print(json.dumps(report))
    for key in (
        "figure_from_series_ms",
        "figure_from_store_ms",
        "figure_from_store_cached_ms",
        "figure_from_store_unpacked_ms",
        "live_rows_read_ms",
        "finish_run_ms",
        "get_run_pydantic_ms",
    ):
        s = report[key]
        cpu = f", CPU {s['cpu_median']:7.1f} ms (median)" if "cpu_median" in s else ""
        print(f"{key:>29}: {s['min']:7.1f} / {s['median']:7.1f} / {s['max']:7.1f} ms (min / median / max){cpu}")
    print(f"{'figure JSON':>29}: {report['figure_json_kb']:.1f} KB; load average {report['load_average_1_5_15']}")
    return report


if __name__ == "__main__":
    main()
