"""What a big run history costs: the page's load handlers, the Runs tab, a comparison and
``GET /api/train/runs`` with an empty history, one of a single page of runs, and one of 1,000 runs
and 100,000 logged events.

    python -m bench.history_scale [--runs 1000] [--metrics 100000] [--repeats 15] [--quick] [--out FILE]

Three apps are built (``server.build_app``), each in a process of its own over its own temporary
data folder (in one process, an app built after another answered its page 35 % slower whatever its
history): ``empty`` holds only the 3 runs that are compared (a comparison needs runs); ``page``
the same 3 and others up to one page of the Runs table (``ui.run_filters.RUNS_PAGE``); ``full`` the
same 3 and ``--runs`` - 3 others, with refused entries in its queue table (at most
``queue.store.MAX_ENTRIES``). Each run has ``--metrics`` / ``--runs`` logged events, all written as
``bench.history_fill`` says. ``empty`` against ``full`` is the issue's target; ``page`` against
``full`` shows what the history's size costs beyond the rows shown.

Timed interleaved (empty, page, full, ``--repeats`` rounds), medians of wall time and of the
side's process's CPU time:

- ``page load``: ``GET /`` (the page) plus every handler ``demo.load`` calls, called directly with the
  components' initial values (generators: their first update), except ``prewarm`` (it starts a
  standby training worker and reads no history);
- ``runs tab``: what opening the Runs tab runs (``tab.select``: the runs table and the compare
  picker's choices; then the line under the table), each result through its component's
  ``postprocess`` as Gradio sends it;
- ``runs tab over HTTP``: the Refresh button's event (``runs``: the table) through Gradio's queue
  over HTTP (``/gradio_api/call/runs`` and its answer stream), as the page calls it;
- ``compare``: ``compare_panel.compare_runs`` of the 3 runs, cold (the shared series cache emptied)
  and its figure's JSON;
- ``api runs``: ``GET /api/train/runs`` (its default page, up to 200 runs) through the ASGI app;
- ``api runs page 50``: ``GET /api/train/runs?limit=50`` (a client's first page of 50).

Prints one JSON line and a table, and writes ``--out`` (docs/bench-results/history_scale.json by
default). Target (issue 51): full within 10 % of empty.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.history_fill import fill, fill_queue
from bench.history_side import ANSWER, MEASURES

REPO = Path(__file__).resolve().parents[1]
COMPARED = 3  # runs in the comparison, in every history
QUEUE_REFUSED = 50  # refused queue entries kept in the full history


class Worker:
    """One side in a process of its own (``bench.history_side``: its app built there), so that the
    sides share no interpreter: a Gradio app built after another in one process answered its page
    35 % slower whatever its history. ``time(name)`` runs one measure there: (wall ms, CPU ms of
    that process, all its threads: the app's work without the waits for other processes)."""

    def __init__(self, data_dir: Path, compared: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.history_side", str(data_dir), *compared],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._answer()  # ready

    def _answer(self) -> Any:
        for line in self.process.stdout:
            if line.startswith(ANSWER):
                return json.loads(line[len(ANSWER) :])
        raise RuntimeError(f"the side's process ended (exit {self.process.wait()})")

    def time(self, name: str) -> tuple[float, float]:
        self.process.stdin.write(name + "\n")
        self.process.stdin.flush()
        answer = self._answer()
        if "error" in answer:
            raise RuntimeError(f"{name}: {answer['error']}")
        return answer["ms"], answer["cpu_ms"]

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def interleaved(sides: dict[str, Worker], repeats: int) -> dict[str, dict[str, Any]]:
    """Each measure on each side in turn (A B C A B C ..., ``repeats`` rounds, one warm-up call
    each first): per measure and side the median wall ms, the median CPU ms and every wall time."""
    wall = {name: {side: [] for side in sides} for name in MEASURES}
    cpu = {name: {side: [] for side in sides} for name in MEASURES}
    for name in MEASURES:
        for worker in sides.values():
            worker.time(name)
    for _ in range(repeats):
        for name in MEASURES:
            for side, worker in sides.items():
                ms, cpu_ms = worker.time(name)
                wall[name][side].append(ms)
                cpu[name][side].append(cpu_ms)
    return {
        name: {
            side: {
                "ms": round(statistics.median(wall[name][side]), 2),
                "cpu_ms": round(statistics.median(cpu[name][side]), 2),
                "all_ms": [round(t, 1) for t in wall[name][side]],
            }
            for side in sides
        }
        for name in MEASURES
    }


def _ratios(figures: dict[str, dict[str, Any]]) -> None:
    """Add full / empty and full / one page (wall and CPU medians) to each measure of ``figures``."""
    for row in figures.values():
        for base in ("empty", "page"):
            for key in ("ms", "cpu_ms"):
                row[f"full/{base}" + ("" if key == "ms" else " cpu")] = round(row["full"][key] / row[base][key], 3)


def _table(figures: dict[str, dict[str, Any]]) -> str:
    """The figures as a text table: median wall ms per side, the ratios, and CPU ms per side."""
    lines = [
        f"{'median of the rounds':20s} {'empty':>8s} {'1 page':>8s} {'full':>8s} {'full/empty':>11s} "
        f"{'full/1 page':>11s}   CPU ms empty / 1 page / full (full/empty)"
    ]
    for name, row in figures.items():
        cpu = " / ".join(f"{row[side]['cpu_ms']:.1f}" for side in ("empty", "page", "full"))
        lines.append(
            f"{name:20s} {row['empty']['ms']:8.1f} {row['page']['ms']:8.1f} {row['full']['ms']:8.1f} "
            f"{row['full/empty']:11.3f} {row['full/page']:11.3f}   {cpu} ({row['full/empty cpu']:.3f})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Build the three histories, time them interleaved (each side's app in its own process), print
    and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--metrics", type=int, default=100_000, help="logged events over all runs")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="100 runs, 5,000 events, 2 repeats: checks the script")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "bench-results" / "history_scale.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.metrics, args.repeats = 100, 5_000, 2
    from ui.run_filters import RUNS_PAGE

    per_run = args.metrics // args.runs
    with tempfile.TemporaryDirectory() as folder:
        paths = {side: Path(folder) / side / "studio.db" for side in ("empty", "page", "full")}
        began = time.perf_counter()
        for side, others in (("empty", 0), ("page", RUNS_PAGE - COMPARED), ("full", args.runs - COMPARED)):
            fill(paths[side], others, per_run * others, first=args.runs - COMPARED - others)
            fill(paths[side], COMPARED, per_run * COMPARED, first=args.runs - COMPARED)  # the same 3 in each
        fill_queue(paths["full"], QUEUE_REFUSED)
        fill_s = time.perf_counter() - began
        compared = [f"job_hist_{args.runs - COMPARED + i:05d}" for i in range(COMPARED)]
        sides: dict[str, Worker] = {}
        try:
            for side, path in paths.items():
                sides[side] = Worker(path.parent, compared)
            figures = interleaved(sides, args.repeats)
        finally:
            for worker in sides.values():
                worker.close()
        size_mb = paths["full"].stat().st_size / 2**20
    _ratios(figures)
    report = {
        "runs": {"empty": COMPARED, "page": RUNS_PAGE, "full": args.runs},
        "metrics": {"empty": per_run * COMPARED, "page": per_run * RUNS_PAGE, "full": per_run * args.runs},
        "queue_entries_full": QUEUE_REFUSED,
        "repeats": args.repeats,
        "fill_s": round(fill_s, 1),
        "full_db_mib": round(size_mb, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "figures": figures,
    }
    print(json.dumps(report))
    print("\n" + _table(figures))
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


def _cpu_name() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else the machine type."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


if __name__ == "__main__":
    main()
