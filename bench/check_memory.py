"""The pre-flight check as a client meets it: its latency on a real file, and the app's memory while
the check reads a file with one huge row (issue 46).

    python -m bench.check_memory [--quick] [--dataset FILE] [--big-mb 100] [--repeats 3] [--port 7873]

Runs the real ``python app.py`` on a loopback port with a throwaway data dir (``bench.latency.App``)
and calls ``POST /api/train/preflight`` over HTTP with the default request on ``--dataset``
(alpaca_en_demo.json, 999 rows), after ``POST /prewarm`` as a page load does (the forkserver has
imported the stack): the first check (the check worker starts and loads the tokenizer) and
``--repeats`` more (warm). Then it writes a one-row Alpaca file whose ``output`` is
``--big-mb`` MB and checks it, sampling every 50 ms the resident memory of the app process alone
and of each of its workers; it reports the peaks, the answer's status and first error, and the
wall time. Target: the app stays under 1 GB. Prints one JSON line, then a human summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

import psutil

from bench.latency import DEFAULT_DATASET, App, prewarm

SAMPLE_S = 0.05


class Peaks:
    """Peak RSS (MiB) of the app process and of its workers, sampled in a thread until ``stop``."""

    def __init__(self, app: App) -> None:
        self.app, self.app_mib, self.worker_mib = app, 0.0, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        main = psutil.Process(self.app.process.pid)
        while not self._done.is_set():
            try:
                self.app_mib = max(self.app_mib, main.memory_info().rss / 2**20)
                for worker in self.app.workers():
                    self.worker_mib = max(self.worker_mib, worker.memory_info().rss / 2**20)
            except psutil.Error:
                pass
            time.sleep(SAMPLE_S)

    def stop(self) -> dict:
        self._done.set()
        self._thread.join()
        return {"app_peak_rss_mib": round(self.app_mib), "worker_peak_rss_mib": round(self.worker_mib)}


def check(app: App, dataset: Path, timeout_s: float = 900) -> tuple[float, dict]:
    """(seconds, answer) of one POST /preflight of the default request on ``dataset``."""
    began = time.perf_counter()
    response = app.client.post("/api/train/preflight", json={"local_datasets": [str(dataset)]}, timeout=timeout_s)
    seconds = time.perf_counter() - began
    body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
    errors = body.get("errors") or []
    return seconds, {
        "status": response.status_code,
        "rows_read": body.get("rows_read"),
        "first_error": errors[0]["message"] if errors else body.get("detail"),
    }


def big_row_file(folder: Path, megabytes: float) -> Path:
    """A one-row Alpaca file (JSON array) whose ``output`` is ``megabytes`` MB of letters."""
    path = folder / "big_row.json"
    output = "x" * int(megabytes * 2**20)
    path.write_text(json.dumps([{"instruction": "repeat", "input": "", "output": output}]), encoding="utf-8")
    return path


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 5 MB row and one warm repeat")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--big-mb", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--port", type=int, default=7873)
    parser.add_argument("--model", type=Path, default=None, help="a model folder to check with (default model)")
    args = parser.parse_args(argv)
    big_mb, repeats = (5.0, 1) if args.quick else (args.big_mb, args.repeats)
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        folder = Path(tmp) / "data"
        folder.mkdir()
        dataset = folder / args.dataset.name
        dataset.write_bytes(args.dataset.read_bytes())
        app = App(args.port, Path(tmp) / "studio", dataset, args.model)
        try:
            report: dict = {"bench": "check_memory", "page_served_s": round(app.wait_for_page(), 2)}
            report["idle_app_rss_mib"] = round(psutil.Process(app.process.pid).memory_info().rss / 2**20)
            report["standby_ready_s"] = prewarm(app)  # what opening the page does: the stack imported
            first, answer = check(app, dataset)
            warm = [check(app, dataset)[0] for _ in range(repeats)]
            report.update(
                first_check_s=round(first, 2),
                warm_check_s=[round(s, 2) for s in warm],
                warm_check_median_s=round(statistics.median(warm), 2),
                rows_read=answer["rows_read"],
            )
            big = big_row_file(folder, big_mb)
            peaks = Peaks(app)
            seconds, answer = check(app, big)
            report.update(big_row_mb=big_mb, big_row_check_s=round(seconds, 2), big_row_answer=answer, **peaks.stop())
            report["app_alive_after"] = app.process.poll() is None
        finally:
            app.close()
    print(json.dumps(report))
    print(
        f"check of {report['rows_read']} rows: first {report['first_check_s']} s, warm median "
        f"{report['warm_check_median_s']} s; a {big_mb:g} MB row: answered {answer['status']} in "
        f"{report['big_row_check_s']} s, app peak {report['app_peak_rss_mib']} MiB, worker peak "
        f"{report['worker_peak_rss_mib']} MiB",
        file=sys.stderr,
    )
    return report


if __name__ == "__main__":
    main()
