"""What a big run history costs: the page's load handlers, the Runs tab, a comparison and
``GET /api/train/runs`` with an empty history against one of 1,000 runs and 100,000 logged events.

    python -m bench.history_scale [--runs 1000] [--metrics 100000] [--repeats 7] [--quick] [--out FILE]

Two apps are built in this process (``server.build_app``), each over its own temporary data folder:
A's history holds only the 3 runs that are compared (a comparison needs runs), B's holds the same 3
plus ``--runs`` - 3 others, written through the studio's own ``RunStore`` (``create_run``,
``add_metric`` per logged event, ``finish_run``, which packs the loss series), spread over the past
year, in the mix of phases a real history has; every 10th event is an eval event. B's queue table
holds refused entries too (``QueueStore``, at most ``queue.store.MAX_ENTRIES``).

Timed, A B A B (``--repeats`` rounds, each measuring A then B, median reported):

- ``page load``: ``GET /`` (the page) plus every handler ``demo.load`` calls, called directly with the
  components' initial values (generators: their first update), except ``prewarm`` (it starts a
  standby training worker and reads no history);
- ``runs tab``: what opening the Runs tab runs (``tab.select``: the runs table and the compare
  picker's choices), each result through its component's ``postprocess`` as Gradio sends it;
- ``compare``: ``compare_panel.compare_runs`` of the 3 runs, cold (the shared series cache emptied)
  and its figure's JSON;
- ``api runs``: ``GET /api/train/runs`` (its default page) through the ASGI app;
- ``api runs page 50``: ``GET /api/train/runs?limit=50`` (a client's first page of 50).

Prints one JSON line and a table (median ms of A, of B, B / A), and writes ``--out``
(docs/bench-results/history_scale.json by default). Target (issue 51): B within 10 % of A.
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
        self.demo = self.app.state.gradio_app.get_blocks()
        runner = self.app.state.runner
        self.ctx = Context(runner=runner, settings=self.settings, tasks=self.app.state.tasks, queue=self.app.state.queue)
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
        self.client.close()
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
    from ui import compare_panel, run_handlers

    handlers = side.load_handlers()

    def page_load() -> None:
        side.client.get("/").raise_for_status()
        for _, call in handlers:
            _first(call())

    def runs_tab() -> None:
        table = run_handlers.runs_table(side.ctx)
        side.runs_table.postprocess(table)
        picker = compare_panel.choices(side.ctx, [])
        side.picker.postprocess(picker.get("value"))  # the choices go as a config update
        json.dumps(picker.get("choices"))

    def compare_cold() -> None:
        compare.SHARED.clear()
        figure, diff = compare_panel.compare_runs(side.ctx, compared, "step", 0.6)
        figure.to_json()

    def api(query: str) -> Callable[[], None]:
        def call() -> None:
            side.client.get(f"/api/train/runs{query}").raise_for_status()

        return call

    return {
        "page load": page_load,
        "runs tab": runs_tab,
        "compare 3 runs": compare_cold,
        "api runs": api(""),
        "api runs page 50": api("?limit=50"),
    }


def ab(a: dict[str, Callable], b: dict[str, Callable], repeats: int) -> dict[str, dict[str, Any]]:
    """Each measure A B A B ... ``repeats`` rounds (one warm-up call each first); median ms per side."""
    times: dict[str, dict[str, list[float]]] = {name: {"A": [], "B": []} for name in a}
    for name in a:
        a[name]()
        b[name]()
    for _ in range(repeats):
        for name in a:
            for label, side in (("A", a), ("B", b)):
                began = time.perf_counter()
                side[name]()
                times[name][label].append((time.perf_counter() - began) * 1000)
    found = {}
    for name, sides in times.items():
        med_a, med_b = statistics.median(sides["A"]), statistics.median(sides["B"])
        found[name] = {
            "empty_ms": round(med_a, 2),
            "full_ms": round(med_b, 2),
            "ratio": round(med_b / med_a, 3) if med_a else None,
            "empty_all_ms": [round(t, 2) for t in sides["A"]],
            "full_all_ms": [round(t, 2) for t in sides["B"]],
        }
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Build both histories, time them A B A B, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--metrics", type=int, default=100_000, help="logged events over all runs")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="100 runs, 5,000 events, 3 repeats: checks the script")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "bench-results" / "history_scale.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.metrics, args.repeats = 100, 5_000, 3
    with tempfile.TemporaryDirectory() as folder:
        empty, full = Path(folder) / "empty", Path(folder) / "full"
        per_run = args.metrics // args.runs
        fill(empty / "studio.db", COMPARED, per_run * COMPARED, first=args.runs - COMPARED)
        began = time.perf_counter()
        fill(full / "studio.db", args.runs - COMPARED, per_run * (args.runs - COMPARED))
        fill(full / "studio.db", COMPARED, per_run * COMPARED, first=args.runs - COMPARED)
        fill_queue(full / "studio.db", QUEUE_REFUSED)
        fill_s = time.perf_counter() - began
        compared = [f"job_hist_{args.runs - COMPARED + i:05d}" for i in range(COMPARED)]
        a, b = Side(empty), Side(full)
        try:
            figures = ab(measures(a, compared), measures(b, compared), args.repeats)
        finally:
            a.close()
            b.close()
        size_mb = (full / "studio.db").stat().st_size / 2**20
    report = {
        "runs": args.runs,
        "metrics": per_run * args.runs,
        "queue_entries": QUEUE_REFUSED,
        "repeats": args.repeats,
        "fill_s": round(fill_s, 1),
        "db_mib": round(size_mb, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": platform.processor() or platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "figures": figures,
    }
    print(json.dumps(report))
    print(f"\n{'':20s} {'empty ms':>10s} {'full ms':>10s} {'full/empty':>10s}")
    for name, row in figures.items():
        print(f"{name:20s} {row['empty_ms']:10.2f} {row['full_ms']:10.2f} {row['ratio'] or 0:10.3f}")
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
