"""Chart cost at long histories: time to build one update (downsampled points + three figures +
JSON, as a watching tab does on every step) and its size on the wire, at 1k / 10k / 100k logged
steps; and the cost of appending one step to the history (which keeps the downsampled series).

    python -m bench.charts [--quick] [--repeats N]

Prints one JSON line with the figures, then a human summary. Target (issue 4): <= 50 ms and
<= 200 KB per update at 10,000 steps, not growing with history length.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import plotly.io as pio

from trainer_core.runs.metrics import MetricsHistory
from trainer_core.runs.minmax import MAX_POINTS
from trainer_core.status import TrainingProgress
from ui import charts


def _history(steps: int) -> tuple[MetricsHistory, float]:
    """A synthetic run (noisy decaying loss, cosine LR, grad norm, eval every 100 steps) and the
    mean time of one ``append`` in microseconds."""
    history = MetricsHistory()
    began = time.perf_counter()
    for step in range(1, steps + 1):
        history.append(
            TrainingProgress(
                job_id="bench",
                step=step,
                total_steps=steps,
                loss=2.0 * math.exp(-step / steps) + 0.1 * math.sin(step),
                learning_rate=2e-4 * 0.5 * (1 + math.cos(math.pi * step / steps)),
                grad_norm=1.0 + 0.3 * math.cos(step / 7),
            )
        )
        if step % 100 == 0:
            history.append(TrainingProgress(job_id="bench", step=step, total_steps=steps, eval_loss=1.5))
    return history, (time.perf_counter() - began) / steps * 1e6


def measure(steps: int, repeats: int) -> dict:
    """Median wall time (ms) of chart points + three figures + JSON encoding, the encoded size (KB),
    and the mean cost of one append (us, including building the synthetic event)."""
    history, append_us = _history(steps)
    times, size = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        points = history.chart_points()
        figures = [charts.loss_figure(points), charts.learning_rate_figure(points), charts.grad_norm_figure(points)]
        size = sum(len(pio.to_json(fig, validate=False)) for fig in figures)
        times.append((time.perf_counter() - began) * 1000)
    return {
        "steps": steps,
        "update_ms": round(statistics.median(times), 1),
        "wire_kb": round(size / 1024, 1),
        "append_us": round(append_us, 1),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k steps, 2 repeats")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    repeats = 2 if args.quick else args.repeats
    results = [measure(n, repeats) for n in sizes]
    report = {"bench": "charts", "max_points_per_series": MAX_POINTS, "results": results}
    print(json.dumps(report))
    for r in results:
        print(
            f"{r['steps']:>7} steps: {r['update_ms']:7.1f} ms per update, {r['wire_kb']:7.1f} KB on the wire, "
            f"{r['append_us']:.0f} us per append"
        )
    return report


if __name__ == "__main__":
    main()
