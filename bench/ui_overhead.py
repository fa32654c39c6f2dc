"""What watching costs: seconds per training step of one config run from the CLI, from the API with
one UI tab watching, and from the API with 20 UI tabs watching; rounds alternate the three.

    python -m bench.ui_overhead [--steps 30] [--rounds 2] [--tabs 20] [--quick] [--dataset FILE] [--model DIR]

A "tab" joins the page's ``watch`` event on Gradio's queue (the generator a browser tab runs on page
load) and reads the status and three charts it streams on every step, over the same HTTP calls the
page's JavaScript makes. Per-step time is taken from the
worker's own ``elapsed_seconds`` (metrics.jsonl): (elapsed at step N - elapsed at step 1) / (N - 1),
so model loading and the first step's warm-up are outside it. CPU seconds per step of the app
process and of the tab clients are reported too: on one machine the clients compete with training
for the same cores, which a browser on a viewer's own machine does not. Targets (issue 4): API + a tab within
2 % of the CLI; 20 tabs within 2 % of one. Each round runs CLI, 1 tab, N tabs in that order.
Prints one JSON line, then a human summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

import httpx
import psutil

from bench.latency import DEFAULT_DATASET, REPO, App

SETTINGS: dict = {"max_seq_length": 256, "batch_size": 4}  # and model_name with --model
QUICK_SETTINGS = {"max_seq_length": 128, "batch_size": 2}  # --quick: the script checked, not the figures


def per_step_s(metrics_jsonl: Path) -> float:
    """(elapsed at the last train step - at the first) / (steps between), from a metrics.jsonl."""
    rows = [json.loads(line) for line in metrics_jsonl.read_text().splitlines()]
    train = [r for r in rows if r.get("loss") is not None]
    first, last = train[0], train[-1]
    return (last["elapsed_seconds"] - first["elapsed_seconds"]) / (last["step"] - first["step"])


def run_cli(dataset: Path, steps: int, out: Path) -> float:
    """One run through ``python -m trainer_core train``; seconds per step."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer_core",
            "train",
            "--dataset",
            str(dataset),
            "--max-steps",
            str(steps),
            "--max-seq-length",
            str(SETTINGS["max_seq_length"]),
            "--batch-size",
            str(SETTINGS["batch_size"]),
            "--output-dir",
            str(out),
            *(["--model-name", SETTINGS["model_name"]] if "model_name" in SETTINGS else []),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return per_step_s(out / "metrics.jsonl")


def watch_endpoint(url: str) -> tuple[str, int]:
    """The page's queue prefix (e.g. ``/gradio_api``) and the id of its ``watch`` event."""
    config = httpx.get(f"{url}/config", timeout=30).json()
    ids = [d.get("id", i) for i, d in enumerate(config["dependencies"]) if d.get("api_name") == "watch"]
    return config.get("api_prefix", ""), ids[0]


def _watch(url: str, endpoint: tuple[str, int], counts: list[int], index: int) -> None:
    """One tab: join the ``watch`` event on Gradio's queue and read its server-sent updates, as the
    page's JavaScript does (counting them, not decoding the charts)."""
    prefix, fn_index = endpoint
    session = uuid.uuid4().hex
    with httpx.Client(base_url=url + prefix, timeout=None) as client:
        client.post(
            "/queue/join",
            json={"data": [], "event_data": None, "fn_index": fn_index, "trigger_id": None, "session_hash": session},
        ).raise_for_status()
        with client.stream("GET", "/queue/data", params={"session_hash": session}) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    kind = json.loads(line[5:]).get("msg")
                    if kind == "process_generating":
                        counts[index] += 1
                    elif kind == "process_completed":
                        return


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def run_api(app: App, dataset: Path, steps: int, out: Path, tabs: int) -> tuple[float, int, float, float]:
    """One run started with POST /api/train/start while ``tabs`` Gradio clients watch it: seconds
    per step, the fewest updates any tab received, and the CPU seconds per step spent by the app
    process (server side: job thread, Gradio queue, rendering) and by the tab clients (this process;
    in real use, the viewers' machines)."""
    app_process, clients = psutil.Process(app.process.pid), psutil.Process()
    app_cpu, client_cpu = _cpu_s(app_process), _cpu_s(clients)
    app.client.post(
        "/api/train/start",
        json={"local_datasets": [str(dataset)], "max_steps": steps, "output_dir": str(out), **SETTINGS},
    ).raise_for_status()
    counts = [0] * tabs
    endpoint = watch_endpoint(app.url)
    threads = [threading.Thread(target=_watch, args=(app.url, endpoint, counts, i), daemon=True) for i in range(tabs)]
    for thread in threads:
        thread.start()
    while app.client.get("/api/train/status").json()["is_training_running"]:
        time.sleep(2.0)
    for thread in threads:
        thread.join(60)
    app_cpu, client_cpu = _cpu_s(app_process) - app_cpu, _cpu_s(clients) - client_cpu
    status = app.client.get("/api/train/status").json()
    if status["phase"] != "completed":
        raise RuntimeError(f"run ended {status['phase']}: {status.get('error')}")
    return per_step_s(out / "metrics.jsonl"), min(counts), app_cpu / steps, client_cpu / steps


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tabs", type=int, default=20)
    parser.add_argument(
        "--quick", action="store_true", help="3 steps of 2 rows of up to 128 tokens, 1 round, 3 tabs (a smoke run)"
    )
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--port", type=int, default=7872)
    parser.add_argument("--model", type=Path, help="a model folder to train instead of the default model")
    args = parser.parse_args(argv)
    if args.model:
        SETTINGS["model_name"] = str(args.model.resolve())
    steps, rounds, tabs = (3, 1, 3) if args.quick else (args.steps, args.rounds, args.tabs)
    if args.quick:
        SETTINGS.update(QUICK_SETTINGS)
    dataset = args.dataset.resolve()
    times: dict[str, list[float]] = {"cli": [], "api_1_tab": [], f"api_{tabs}_tabs": []}
    fewest_updates = []
    cpu: dict[str, dict[str, list[float]]] = {name: {"app": [], "tabs": []} for name in times if name != "cli"}
    with tempfile.TemporaryDirectory() as data_dir:
        app = App(args.port, Path(data_dir), dataset, args.model and args.model.resolve())
        try:
            app.wait_for_page()
            for r in range(rounds):
                times["cli"].append(run_cli(dataset, steps, Path(data_dir) / f"cli-{r}"))
                for name, n in (("api_1_tab", 1), (f"api_{tabs}_tabs", tabs)):
                    seconds, fewest, app_cpu, tab_cpu = run_api(
                        app, dataset, steps, Path(data_dir) / "runs" / f"{name}-{r}", n
                    )
                    times[name].append(seconds)
                    fewest_updates.append(fewest)
                    cpu[name]["app"].append(round(app_cpu, 3))
                    cpu[name]["tabs"].append(round(tab_cpu, 3))
                print(
                    f"# round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s/step" for k, v in times.items()),
                    file=sys.stderr,
                )
        finally:
            app.close()
    medians = {name: round(statistics.median(v), 4) for name, v in times.items()}
    report = {
        "bench": "ui_overhead",
        "steps": steps,
        "rounds": rounds,
        "tabs": tabs,
        "seconds_per_step": times,
        "median_seconds_per_step": medians,
        "fewest_updates_per_tab": min(fewest_updates),
        "cpu_s_per_step": cpu,
        "api_1_tab_vs_cli": round(medians["api_1_tab"] / medians["cli"] - 1, 4),
        "many_tabs_vs_1_tab": round(medians[f"api_{tabs}_tabs"] / medians["api_1_tab"] - 1, 4),
    }
    print(json.dumps(report))
    print(
        f"s/step (median of {rounds}): CLI {medians['cli']:.3f}, API + 1 tab {medians['api_1_tab']:.3f} "
        f"({report['api_1_tab_vs_cli']:+.1%}), API + {tabs} tabs {medians[f'api_{tabs}_tabs']:.3f} "
        f"({report['many_tabs_vs_1_tab']:+.1%} vs 1 tab); every tab got >= {report['fewest_updates_per_tab']} updates"
    )
    for name, parts in cpu.items():
        print(
            f"{name}: CPU s per step in the app {statistics.median(parts['app']):.3f}, "
            f"in the tab clients {statistics.median(parts['tabs']):.3f}"
        )
    return report


if __name__ == "__main__":
    main()
