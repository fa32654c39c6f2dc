"""What an idle page costs the browser: CPU seconds of Chromium's processes while a Train tab, then a
Chat tab, sits open on an idle app (nothing trains, nothing runs), and on a blank page for reference.

    python -m bench.idle_page [--seconds 30] [--settle 10]

The app is ``python app.py`` in a child process with its own data dir (``bench.latency.App``); the
browser is headless Chromium driven by Playwright. For each page: load it, wait ``--settle`` s for
its load events, then sum the user + system CPU seconds of the browser and all its child processes
over ``--seconds`` s. Reported as a share of one core (CPU seconds / wall seconds), with the
machine's load average beside it (a shared machine slows the browser, not the share much). Target
(issue 53): an idle Train or Chat tab at most 5 % of a core. Prints one JSON line, then a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil

from bench.latency import DEFAULT_DATASET, App
from tests.e2e.conftest import free_port

ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]


def browser_cpu_s(app_pid: int) -> float:
    """User + system CPU seconds of the browser: every process this one started (Playwright's driver,
    Chromium and its renderers) except the app's."""
    app = psutil.Process(app_pid)
    skip = {app_pid, *(p.pid for p in app.children(recursive=True))}
    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        if proc.pid in skip:
            continue
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def measure(app_pid: int, seconds: float) -> float:
    """A share of one core: the browser's CPU seconds over ``seconds`` of wall time, divided by it
    (the page is left alone: this process sleeps)."""
    before, started = browser_cpu_s(app_pid), time.perf_counter()
    time.sleep(seconds)
    return (browser_cpu_s(app_pid) - before) / (time.perf_counter() - started)


def main() -> None:
    """Measure a blank page, an idle Train tab and an idle Chat tab; print JSON and a summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=10.0)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as data_dir, sync_playwright() as p:
        app = App(free_port(), Path(data_dir), DEFAULT_DATASET)
        try:
            app.wait_for_page()
            browser = p.chromium.launch(executable_path=chromium, args=ARGS)
            pid = app.process.pid
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            results = {}
            page.goto("about:blank")
            page.wait_for_timeout(args.settle * 1000)
            results["blank"] = measure(pid, args.seconds)
            page.goto(app.url)
            page.locator("#status").wait_for(timeout=120_000)
            page.wait_for_timeout(args.settle * 1000)
            results["train"] = measure(pid, args.seconds)
            page.get_by_role("tab", name="Chat", exact=True).click()
            page.wait_for_timeout(args.settle * 1000)
            results["chat"] = measure(pid, args.seconds)
            browser.close()
        finally:
            app.process.terminate()
            app.process.wait(30)
    report = {
        "bench": "idle_page",
        "seconds": args.seconds,
        "core_share": {k: round(v, 4) for k, v in results.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(report))
    for name, share in results.items():
        print(f"{name:>6}: {100 * share:5.1f} % of a core over {args.seconds:g} s")


if __name__ == "__main__":
    main()
