"""One side of ``bench.history_scale``, in a process of its own: an app (``server.build_app``) over a
data folder, and the calls timed on it (``measures``). Run as ``python -m bench.history_side
DATA_DIR JOB_ID...`` (the runs to compare): it builds the app, answers ready, then times each
measure named on a line of stdin, answering each on stdout after ``ANSWER``."""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

ANSWER = "@@ "  # how the process marks its answers on stdout
MEASURES = ("page load", "runs tab", "runs tab over HTTP", "compare 3 runs", "api runs", "api runs page 50")


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
        """Stop the queue's dispatcher and the app's lifespan; close the history."""
        self.app.state.queue.close()
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
        run_filters.count_line(side.ctx, "", run_filters.ALL_STATUSES, "", table)  # the line under it, after
        picker = compare_panel.choices(side.ctx, [])
        side.picker.postprocess(picker.get("value"))  # the choices go as a config update
        json.dumps(picker.get("choices"))

    def compare_cold() -> None:
        compare.SHARED.clear()
        figure, diff = compare_panel.compare_runs(side.ctx, compared, "step", 0.6)
        figure.to_json()

    def runs_event() -> None:  # the Refresh button's event over HTTP, as the page's JavaScript calls it
        data = ["", run_filters.ALL_STATUSES, ""]
        joined = side.client.post("/gradio_api/call/runs", json={"data": data})
        joined.raise_for_status()
        answer = side.client.get(f"/gradio_api/call/runs/{joined.json()['event_id']}").text
        if "event: complete" not in answer:
            raise RuntimeError(f"the runs event failed: {answer[:300]}")

    def api(query: str) -> Callable[[], None]:
        def call() -> None:
            side.client.get(f"/api/train/runs{query}").raise_for_status()

        return call

    return dict(zip(MEASURES, (page_load, runs_tab, runs_event, compare_cold, api(""), api("?limit=50")), strict=True))


def serve(data_dir: Path, compared: list[str]) -> None:
    """Build the side's app, say so, then time each measure named on stdin until it closes: (wall
    ms, CPU ms of this process, all its threads: the app's work without the waits for other processes)."""
    with redirect_stdout(io.StringIO()):  # the app's own prints stay off the answers
        side = Side(data_dir)
        calls = measures(side, compared)
    print(ANSWER + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        name = line.strip()
        try:
            began, began_cpu = time.perf_counter(), time.process_time()
            calls[name]()
            done = {"ms": (time.perf_counter() - began) * 1000, "cpu_ms": (time.process_time() - began_cpu) * 1000}
        except Exception as exc:  # noqa: BLE001 - said to the parent, which stops
            done = {"error": f"{type(exc).__name__}: {exc}"}
        print(ANSWER + json.dumps(done), flush=True)
    side.close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2:])
