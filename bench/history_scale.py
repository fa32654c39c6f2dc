"""What a big run history costs: the page's load handlers, the Runs tab, a comparison and
``GET /api/train/runs`` with an empty history, one of a single page of runs, and one of 1,000 runs
and 100,000 logged events.

    python -m bench.history_scale [--runs 1000] [--metrics 100000] [--repeats 15] [--quick] [--out FILE]

Three apps are built in this process (``server.build_app``), each over its own temporary data
folder: ``empty`` holds only the 3 runs that are compared (a comparison needs runs); ``page`` the
same 3 and others up to one page of the Runs table (``ui.run_filters.RUNS_PAGE``); ``full`` the same 3
and ``--runs`` - 3 others, with refused entries in its queue table (``QueueStore``, at most
``queue.store.MAX_ENTRIES``). Runs are written through the studio's own ``RunStore``
(``create_run``, ``add_metric`` per logged event, ``finish_run``, which packs the loss series),
``--metrics`` / ``--runs`` events each (every 10th an eval event), spread over the past year in the
mix of phases a real history has. ``empty`` against ``full`` is the issue's target; ``page``
against ``full`` shows what the history's size costs beyond the rows shown.

Timed interleaved (empty, page, full, ``--repeats`` rounds), medians of wall and CPU time:

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
import math
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
COMPARED = 3  # runs in the comparison, in both histories
EVAL_EVERY = 10  # every 10th logged event of a run is an eval event
PHASES = ("completed",) * 7 + ("error", "stopped", "interrupted")  # a history's usual mix
QUEUE_REFUSED = 50  # refused queue entries kept in B's history
DAY_S = 86_400.0


def _request(index: int) -> dict[str, Any]:
    """Run ``index``'s stored settings: a real ``TrainingStartRequest``'s ``public_dict()`` with a few varied fields."""
    from trainer_core.schemas import TrainingStartRequest

    request = TrainingStartRequest(
        local_datasets=[f"/data/set_{index % 17}.jsonl"],
        max_steps=100 + index % 5 * 50,
        learning_rate=1e-4 * (1 + index % 4),
        lora_r=(8, 16, 32)[index % 3],
        training_type=("lora", "qlora", "full")[index % 3] if index % 11 else "full",
    )
    return request.public_dict()


def fill(db_path: Path, runs: int, metrics: int, first: int = 0, seed: int = 0) -> None:
    """Write ``runs`` finished runs (job ids ``job_hist_<first + i>``) with ``metrics`` logged events
    in all into the history at ``db_path``, through ``RunStore``'s own methods."""
    from trainer_core.runs.store import RunStore
    from trainer_core.status import TrainingProgress

    rng = random.Random(seed)
    store = RunStore(db_path)
    now = time.time()
    per_run = max(1, metrics // max(1, runs))
    for i in range(runs):
        index = first + i
        job_id = f"job_hist_{index:05d}"
        created = now - DAY_S * 365 * (1 - (i + 1) / (runs + 1)) - 3600  # oldest first, the newest an hour ago
        store.create_run(job_id, _request(index), f"/nonexistent/runs/{job_id}", "training", created_at=created)
        tokens = 0
        for event in range(1, per_run + 1):
            step = event
            loss = 2.0 * math.exp(-event / per_run) + 0.05 * rng.random() + 0.3
            if event % EVAL_EVERY == 0:
                progress = TrainingProgress(
                    job_id=job_id, step=step, total_steps=per_run, eval_loss=loss + 0.1, elapsed_seconds=step * 2.0
                )
            else:
                tokens += 4096
                progress = TrainingProgress(
                    job_id=job_id,
                    step=step,
                    total_steps=per_run,
                    loss=loss,
                    learning_rate=1e-4,
                    grad_norm=1.0 + rng.random(),
                    epoch=event / per_run,
                    progress_percent=100.0 * event / per_run,
                    elapsed_seconds=step * 2.0,
                    num_tokens=tokens,
                )
            store.add_metric(progress)
        phase = PHASES[index % len(PHASES)]
        error = "CUDA out of memory" if phase == "error" else None
        store.finish_run(job_id, phase, error, None, phase, finished_at=created + per_run * 2.0 + 60)
        if index % 25 == 0:
            store.set_label(job_id, name=f"sweep {index // 25}", note="lr sweep")
    store.close()


def fill_queue(db_path: Path, entries: int) -> None:
    """``entries`` refused entries in the queue table (refused: the dispatcher never starts them)."""
    from trainer_core.queue.store import QueueState, QueueStore

    queue = QueueStore(db_path)
    for index in range(entries):
        entry = queue.add(_request(index), had_token=False)
        queue.set_state(entry.queue_id, QueueState.refused, "not enough GPU memory")
    queue.close()


class Side:
    """One app (``server.build_app``) over a data folder, with the handles the timings call."""

    def __init__(self, data_dir: Path) -> None:
        from starlette.testclient import TestClient

        from server import build_app
        from trainer_core.settings import Settings
        from ui.context import Context

        self.settings = Settings(data_dir=data_dir)
        self.app = build_app(self.settings)
        self.client = TestClient(self.app)
        self.client.__enter__()  # the app's lifespan: Gradio's queue runs, so its events can be called
        self.demo = self.app.state.gradio_app.get_blocks()
        runner = self.app.state.runner
        self.ctx = Context(
            runner=runner, settings=self.settings, tasks=self.app.state.tasks, queue=self.app.state.queue
        )
        self.runs_table = self._component("runs-table")
        self.picker = self._component("compare-runs")

    def _component(self, elem_id: str) -> Any:
        return next(b for b in self.demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)

    def load_handlers(self) -> list[tuple[str, Callable[[], Any]]]:
        """(name, call) of each function ``demo.load`` runs but ``prewarm``, with the inputs' initial
        values (and None for a ``gr.Request`` parameter, as Gradio's ``special_args`` fills it)."""
        from gradio.helpers import special_args

        found = []
        for fn in self.demo.fns.values():
            if not any(target[0] == self.demo._id and target[1] == "load" for target in fn.targets):
                continue
            name = getattr(getattr(fn.fn, "func", fn.fn), "__qualname__", str(fn.fn))
            if "prewarm" in name:
                continue
            values, *_ = special_args(fn.fn, [getattr(block, "value", None) for block in fn.inputs])
            found.append((name, (lambda f=fn.fn, v=values: f(*v))))
        return found

    def close(self) -> None:
        self.app.state.queue.stop() if hasattr(self.app.state.queue, "stop") else None
        self.client.__exit__(None, None, None)
        self.app.state.runner.store.close()


def _first(result: Any) -> Any:
    """A generator handler's first update (what the page gets first); other results as they are."""
    if isinstance(result, Iterator):
        first = next(result, None)
        result.close()
        return first
    return result


def measures(side: Side, compared: list[str]) -> dict[str, Callable[[], Any]]:
    """name -> a call timed for ``side``."""
    from trainer_core.runs import compare
    from ui import compare_panel, run_filters, run_handlers

    handlers = side.load_handlers()

    def page_load() -> None:
        side.client.get("/").raise_for_status()
        for _, call in handlers:
            _first(call())

    def runs_tab() -> None:
        table = run_handlers.runs_table(side.ctx)
        side.runs_table.postprocess(table)
        run_filters.count_line(side.ctx)  # the line under the table (after the table changed)
        picker = compare_panel.choices(side.ctx, [])
        side.picker.postprocess(picker.get("value"))  # the choices go as a config update
        json.dumps(picker.get("choices"))

    def compare_cold() -> None:
        compare.SHARED.clear()
        figure, diff = compare_panel.compare_runs(side.ctx, compared, "step", 0.6)
        figure.to_json()

    def runs_event() -> None:  # the Refresh button's event over HTTP, as the page's JavaScript calls it
        data = ["", run_filters.ALL_STATUSES, "", run_filters.RUNS_PAGE]
        joined = side.client.post("/gradio_api/call/runs", json={"data": data})
        joined.raise_for_status()
        answer = side.client.get(f"/gradio_api/call/runs/{joined.json()['event_id']}").text
        if "event: complete" not in answer:
            raise RuntimeError(f"the runs event failed: {answer[:300]}")

    def api(query: str) -> Callable[[], None]:
        def call() -> None:
            side.client.get(f"/api/train/runs{query}").raise_for_status()

        return call

    return {
        "page load": page_load,
        "runs tab": runs_tab,
        "runs tab over HTTP": runs_event,
        "compare 3 runs": compare_cold,
        "api runs": api(""),
        "api runs page 50": api("?limit=50"),
    }


def interleaved(sides: dict[str, dict[str, Callable]], repeats: int) -> dict[str, dict[str, Any]]:
    """Each measure on each side in turn (A B C A B C ..., ``repeats`` rounds, one warm-up call
    each first): per measure and side the median wall ms, the median CPU ms of this process (all
    its threads: the app's work without the waits for other processes on a shared machine) and
    every wall time."""
    names = list(next(iter(sides.values())))
    wall = {name: {side: [] for side in sides} for name in names}
    cpu = {name: {side: [] for side in sides} for name in names}
    for name in names:
        for calls in sides.values():
            calls[name]()
    for _ in range(repeats):
        for name in names:
            for side, calls in sides.items():
                began, began_cpu = time.perf_counter(), time.process_time()
                calls[name]()
                wall[name][side].append((time.perf_counter() - began) * 1000)
                cpu[name][side].append((time.process_time() - began_cpu) * 1000)
    return {
        name: {
            side: {
                "ms": round(statistics.median(wall[name][side]), 2),
                "cpu_ms": round(statistics.median(cpu[name][side]), 2),
                "all_ms": [round(t, 1) for t in wall[name][side]],
            }
            for side in sides
        }
        for name in names
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
    """Build the three histories, time them interleaved, print and write the figures."""
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
        sides = {side: Side(path.parent) for side, path in paths.items()}
        try:
            figures = interleaved({side: measures(app, compared) for side, app in sides.items()}, args.repeats)
        finally:
            for app in sides.values():
                app.close()
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
