"""Cost of the Runs tab's comparison: 10 synthetic runs of 10,000 logged steps each (eval every 100
steps, token counts on every step) written into a temporary ``RunStore`` through its own methods,
then overlaid in one figure with smoothing 0.6.

    python -m bench.compare [--quick] [--runs N] [--steps N] [--repeats N] [--x-axis step|tokens]

Measures (ms, min / median / max over the repeats) building the figure from series already loaded
(EMA + downsampling + figure + JSON); the whole path from the store (list, lean query per run,
series, diff table, figure, JSON) with an empty series cache (cold) and with the finished runs'
series cached (as a second look at the same runs: another smoothing or x axis); reading the runs
through ``get_run`` (a pydantic model per event) for reference; and the figure's JSON size
(``fig.to_json()``). Prints one JSON line,
then a summary. Target (issue 13): <= 150 ms and <= 500 KB for 10 runs x 10,000 steps.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from trainer_core.runs import compare
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingProgress
from ui import compare_view

SMOOTHING = 0.6


def fill(store: RunStore, runs: int, steps: int) -> list[str]:
    """``runs`` finished runs of ``steps`` train events (noisy decaying loss, 512 tokens a step)
    plus an eval event every 100 steps, each with its own learning rate; returns their job ids."""
    job_ids = []
    for r in range(runs):
        job_id = f"job_bench_{r:02d}"
        store.create_run(job_id, {"learning_rate": 1e-4 * (r + 1), "max_steps": steps, "lora_r": 16}, f"/runs/{job_id}",
                         "training")
        for step in range(1, steps + 1):
            loss = 2.0 * math.exp(-step / steps * (1 + r / 5)) + 0.2 * math.sin(step * 0.7 + r) + 0.3
            store.add_metric(TrainingProgress(job_id=job_id, step=step, total_steps=steps, loss=loss,
                                              learning_rate=1e-4, elapsed_seconds=step * 0.1, num_tokens=512 * step))
            if step % 100 == 0:
                store.add_metric(TrainingProgress(job_id=job_id, step=step, total_steps=steps, eval_loss=loss + 0.1,
                                                  elapsed_seconds=step * 0.1))
        store.finish_run(job_id, "completed", None, None, "completed")
        job_ids.append(job_id)
    return job_ids


def _timed(fn: Callable[[], int], repeats: int) -> tuple[list[float], int]:
    """Wall times (ms) of ``repeats`` calls of ``fn`` and the size it returned last (bytes)."""
    times, size = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        size = fn()
        times.append((time.perf_counter() - began) * 1000)
    return times, size


def _stats(times: list[float]) -> dict:
    return {"min": round(min(times), 1), "median": round(statistics.median(times), 1), "max": round(max(times), 1)}


def measure(runs: int, steps: int, repeats: int, x_axis: compare.XAxis = "step") -> dict:
    """The figures for one store of ``runs`` x ``steps``."""
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(Path(folder) / "studio.db")
        began = time.perf_counter()
        job_ids = fill(store, runs, steps)
        fill_s = time.perf_counter() - began
        records = [store.get_run(j) for j in job_ids]
        series = compare.load_series(store, records, x_axis)

        def from_series() -> int:
            figure = compare_view.overlay_figure(compare.curves(series, SMOOTHING), x_axis, SMOOTHING)
            return len(figure.to_json())

        def from_store(cache: compare.SeriesCache) -> int:
            chosen = [r for r in store.list_runs(limit=1000) if r.job_id in job_ids]
            loaded = cache.load(store, chosen, x_axis)
            compare_view.diff_frame(chosen)
            figure = compare_view.overlay_figure(compare.curves(loaded, SMOOTHING), x_axis, SMOOTHING)
            return len(figure.to_json())

        def full_models() -> int:  # the slow way, for reference: every event through pydantic
            return sum(len(store.get_run(j).metrics) for j in job_ids)

        warm = compare.SeriesCache()
        from_store(warm)
        series_ms, size = _timed(from_series, repeats)
        cold_ms, _ = _timed(lambda: from_store(compare.SeriesCache()), repeats)
        warm_ms, _ = _timed(lambda: from_store(warm), repeats)
        pydantic_ms, _ = _timed(full_models, max(1, repeats // 3))
        store.close()
    return {"runs": runs, "steps": steps, "x_axis": x_axis, "smoothing": SMOOTHING, "fill_s": round(fill_s, 1),
            "figure_from_series_ms": _stats(series_ms), "figure_from_store_ms": _stats(cold_ms),
            "figure_from_store_cached_ms": _stats(warm_ms),
            "get_run_pydantic_ms": _stats(pydantic_ms), "figure_json_kb": round(size / 1024, 1)}


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
    report = {"bench": "compare", **measure(runs, steps, repeats, args.x_axis)}
    print(json.dumps(report))
    for key in ("figure_from_series_ms", "figure_from_store_ms", "figure_from_store_cached_ms", "get_run_pydantic_ms"):
        s = report[key]
        print(f"{key:>27}: {s['min']:7.1f} / {s['median']:7.1f} / {s['max']:7.1f} ms (min / median / max)")
    print(f"{'figure JSON':>27}: {report['figure_json_kb']:.1f} KB")
    return report


if __name__ == "__main__":
    main()
