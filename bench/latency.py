"""Latency of the app as a user meets it: app start -> page served, idle RSS, Start -> first
training step (with the time each phase began), and Cancel -> worker gone in every phase.

    python -m bench.latency [--quick] [--dataset FILE] [--port 7871] [--model DIR]

Runs the real ``python app.py`` on a loopback port with a throwaway data dir and drives it over
HTTP (the training API the UI's buttons share). Start -> first step is measured cold (no page open:
the worker imports the training stack first), warm (after ``POST /prewarm``, which every page
load does: a standby worker has imported the stack while the user fills in the form) and again with
no page open (a worker forked from the forkserver that imported the stack for the first run, see
``trainer_core/process/context.py``). Targets (issue 4): page <= 4 s, idle RSS <= 350 MiB,
first step <= 12 s with the default model, Cancel <= 2 s in every phase.
Prints one JSON line, then a human summary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import httpx
import psutil

from trainer_core.process.context import worker_processes

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"
LIVE = ("loading_model", "loading_dataset", "configuring", "training")
POLL_S = 0.02


class App:
    """``python app.py`` in a child process with its own data dir."""

    def __init__(self, port: int, data_dir: Path, dataset: Path, model: Optional[Path] = None) -> None:
        """Launch it; the dataset's folder (and ``model``'s parent, a model folder to allow) are
        its allowed paths."""
        self.url = f"http://127.0.0.1:{port}"
        allowed = os.pathsep.join(str(folder) for folder in (dataset.parent, model and model.parent) if folder)
        env = {**os.environ, "STUDIO_DATA_DIR": str(data_dir), "STUDIO_ALLOWED_PATHS": allowed}
        self.launched = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "app.py", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def wait_for_page(self, timeout_s: float = 120) -> float:
        """Seconds from launch until ``GET /`` returns the page (200)."""
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"app exited with {self.process.returncode}")
            try:
                if self.client.get("/").status_code == 200:
                    return time.perf_counter() - self.launched
            except httpx.HTTPError:
                pass
            time.sleep(POLL_S)
        raise TimeoutError(f"no page within {timeout_s} s")

    def rss_mib(self) -> float:
        """Resident memory of the app process and all its children, MiB."""
        proc = psutil.Process(self.process.pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20

    def workers(self) -> list[psutil.Process]:
        """Live worker processes (spawned children or forks of the app's forkserver)."""
        return worker_processes(self.process.pid)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()


RUN_FIELDS = {"max_seq_length": 256}  # of every run started here
QUICK_RUN_FIELDS = {"max_seq_length": 64, "batch_size": 1}  # --quick: cheap steps (the figures are not the point)


def _start(app: App, dataset: Path, max_steps: int) -> float:
    response = app.client.post(
        "/api/train/start", json={"local_datasets": [str(dataset)], "max_steps": max_steps, **RUN_FIELDS}
    )
    response.raise_for_status()
    return time.perf_counter()


def _wait_idle(app: App, timeout_s: float = 600) -> None:
    deadline = time.perf_counter() + timeout_s
    while app.client.get("/api/train/status").json()["is_training_running"] and time.perf_counter() < deadline:
        time.sleep(0.2)
    while app.workers() and time.perf_counter() < deadline:
        time.sleep(0.1)


def prewarm(app: App, timeout_s: float = 120) -> float:
    """Seconds from POST /prewarm (what opening the page does) until the standby worker is ready."""
    began = time.perf_counter()
    while not app.client.post("/api/train/prewarm").json()["ready"]:
        if time.perf_counter() - began > timeout_s:
            raise TimeoutError("standby worker not ready")
        time.sleep(0.1)
    return round(time.perf_counter() - began, 2)


def first_step(app: App, dataset: Path) -> dict:
    """Seconds from POST /start until the first training step is reported, and when each phase began."""
    began = _start(app, dataset, max_steps=2)
    phases: dict[str, float] = {}
    while True:
        status = app.client.get("/api/train/status").json()
        now = time.perf_counter() - began
        phases.setdefault(status["phase"], round(now, 2))
        if status["details"].get("step"):
            result = {"first_step_s": round(now, 2), "phase_began_s": phases}
            break
        if status["phase"] in ("error", "completed", "stopped"):
            raise RuntimeError(f"run ended before a step: {status['message']} {status.get('error')}")
        time.sleep(POLL_S)
    _wait_idle(app)
    return result


def cancel_in(app: App, dataset: Path, phase: str) -> Optional[float]:
    """Seconds from Cancel (POST /stop with save=false) in ``phase`` until the job has ended and its
    worker process is gone; None when the phase passed too fast to catch."""
    _start(app, dataset, max_steps=50)
    while (current := app.client.get("/api/train/status").json()["phase"]) != phase:
        if current not in LIVE or LIVE.index(current) > LIVE.index(phase):
            _cancel_and_wait(app)
            return None
        time.sleep(POLL_S / 4)
    return _cancel_and_wait(app)


def _cancel_and_wait(app: App) -> float:
    began = time.perf_counter()
    app.client.post("/api/train/stop", json={"save": False}).raise_for_status()
    while app.client.get("/api/train/status").json()["is_training_running"] or app.workers():
        time.sleep(POLL_S)
    return round(time.perf_counter() - began, 2)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="cancel in the training phase only; 1 row of up to 64 tokens a step"
    )
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--port", type=int, default=7871)
    parser.add_argument("--model", type=Path, help="a model folder to train instead of the default model")
    args = parser.parse_args(argv)
    if args.quick:
        RUN_FIELDS.update(QUICK_RUN_FIELDS)
    if args.model:
        RUN_FIELDS["model_name"] = str(args.model.resolve())
    with tempfile.TemporaryDirectory() as data_dir:
        app = App(args.port, Path(data_dir), args.dataset.resolve(), args.model.resolve() if args.model else None)
        try:
            report: dict = {"bench": "latency", "page_served_s": round(app.wait_for_page(), 2)}
            time.sleep(2)
            report["idle_rss_mib"] = round(app.rss_mib())
            cold = first_step(app, args.dataset.resolve())
            report.update(first_step_cold_s=cold["first_step_s"], phase_began_cold_s=cold["phase_began_s"])
            report["standby_ready_s"] = prewarm(app)
            report["rss_with_standby_mib"] = round(app.rss_mib())
            warm = first_step(app, args.dataset.resolve())
            report.update(first_step_warm_s=warm["first_step_s"], phase_began_warm_s=warm["phase_began_s"])
            again = first_step(app, args.dataset.resolve())  # no page open, the stack imported before
            report.update(first_step_again_s=again["first_step_s"], phase_began_again_s=again["phase_began_s"])
            report["rss_after_runs_mib"] = round(app.rss_mib())
            phases = ("training",) if args.quick else LIVE
            report["cancel_s"] = {phase: cancel_in(app, args.dataset.resolve(), phase) for phase in phases}
        finally:
            app.close()
    print(json.dumps(report))
    print(
        f"page served {report['page_served_s']} s after launch; idle RSS {report['idle_rss_mib']} MiB "
        f"({report['rss_with_standby_mib']} MiB with a standby worker)"
    )
    print(
        f"Start -> first step: {report['first_step_cold_s']} s cold (phases began at {report['phase_began_cold_s']}), "
        f"{report['first_step_warm_s']} s with the page open (standby ready {report['standby_ready_s']} s after "
        f"page load; phases began at {report['phase_began_warm_s']}), {report['first_step_again_s']} s for a later "
        f"Start with no page open (phases began at {report['phase_began_again_s']})"
    )
    print(
        "Cancel -> worker gone: "
        + ", ".join(
            f"{p} {s} s" if s is not None else f"{p} (too fast to catch)" for p, s in report["cancel_s"].items()
        )
    )
    return report


if __name__ == "__main__":
    main()
