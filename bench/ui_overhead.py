"""What watching costs: seconds per training step of one config run from the CLI, from the API with
one UI tab watching, and from the API with 20 UI tabs watching; rounds alternate the three.

    python -m bench.ui_overhead [--steps 30] [--rounds 2] [--tabs 20] [--quick] [--dataset FILE]

A "tab" is a Gradio client on the page's ``watch`` event (the generator a browser tab runs on page
load), streaming status and the three charts on every step. Per-step time is taken from the
worker's own ``elapsed_seconds`` (metrics.jsonl): (elapsed at step N - elapsed at step 1) / (N - 1),
so model loading and the first step's warm-up are outside it. Targets (issue 4): API + a tab within
2 % of the CLI; 20 tabs within 2 % of one.
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
from pathlib import Path
from typing import Optional

from bench.latency import App, DEFAULT_DATASET, REPO

SETTINGS = {"max_seq_length": 256, "batch_size": 4}


def per_step_s(metrics_jsonl: Path) -> float:
    """(elapsed at the last train step - at the first) / (steps between), from a metrics.jsonl."""
    rows = [json.loads(line) for line in metrics_jsonl.read_text().splitlines()]
    train = [r for r in rows if r.get("loss") is not None]
    first, last = train[0], train[-1]
    return (last["elapsed_seconds"] - first["elapsed_seconds"]) / (last["step"] - first["step"])


def run_cli(dataset: Path, steps: int, out: Path) -> float:
    """One run through ``python -m trainer_core train``; seconds per step."""
    subprocess.run([sys.executable, "-m", "trainer_core", "train", "--dataset", str(dataset), "--max-steps", str(steps),
                    "--max-seq-length", str(SETTINGS["max_seq_length"]), "--batch-size", str(SETTINGS["batch_size"]),
                    "--output-dir", str(out)], cwd=REPO, check=True, capture_output=True)
    return per_step_s(out / "metrics.jsonl")


def _watch(url: str, counts: list[int], index: int) -> None:
    from gradio_client import Client

    client = Client(url, verbose=False)
    for _ in client.submit(api_name="/watch"):
        counts[index] += 1


def run_api(app: App, dataset: Path, steps: int, out: Path, tabs: int) -> tuple[float, int]:
    """One run started with POST /api/train/start while ``tabs`` Gradio clients watch it; seconds
    per step and the fewest updates any tab received."""
    app.client.post("/api/train/start", json={"local_datasets": [str(dataset)], "max_steps": steps, "output_dir": str(out),
                                              **SETTINGS}).raise_for_status()
    counts = [0] * tabs
    threads = [threading.Thread(target=_watch, args=(app.url, counts, i), daemon=True) for i in range(tabs)]
    for thread in threads:
        thread.start()
    while app.client.get("/api/train/status").json()["is_training_running"]:
        time.sleep(0.5)
    for thread in threads:
        thread.join(60)
    status = app.client.get("/api/train/status").json()
    if status["phase"] != "completed":
        raise RuntimeError(f"run ended {status['phase']}: {status.get('error')}")
    return per_step_s(out / "metrics.jsonl"), min(counts)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tabs", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 steps, 1 round, 3 tabs")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--port", type=int, default=7872)
    args = parser.parse_args(argv)
    steps, rounds, tabs = (3, 1, 3) if args.quick else (args.steps, args.rounds, args.tabs)
    dataset = args.dataset.resolve()
    times: dict[str, list[float]] = {"cli": [], "api_1_tab": [], f"api_{tabs}_tabs": []}
    fewest_updates = []
    with tempfile.TemporaryDirectory() as data_dir:
        app = App(args.port, Path(data_dir), dataset)
        try:
            app.wait_for_page()
            for r in range(rounds):
                times["cli"].append(run_cli(dataset, steps, Path(data_dir) / f"cli-{r}"))
                for name, n in (("api_1_tab", 1), (f"api_{tabs}_tabs", tabs)):
                    seconds, fewest = run_api(app, dataset, steps, Path(data_dir) / "runs" / f"{name}-{r}", n)
                    times[name].append(seconds)
                    fewest_updates.append(fewest)
                print(f"# round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s/step" for k, v in times.items()), file=sys.stderr)
        finally:
            app.close()
    medians = {name: round(statistics.median(v), 4) for name, v in times.items()}
    report = {"bench": "ui_overhead", "steps": steps, "rounds": rounds, "tabs": tabs, "seconds_per_step": times,
              "median_seconds_per_step": medians, "fewest_updates_per_tab": min(fewest_updates),
              "api_1_tab_vs_cli": round(medians["api_1_tab"] / medians["cli"] - 1, 4),
              "many_tabs_vs_1_tab": round(medians[f"api_{tabs}_tabs"] / medians["api_1_tab"] - 1, 4)}
    print(json.dumps(report))
    print(f"s/step (median of {rounds}): CLI {medians['cli']:.3f}, API + 1 tab {medians['api_1_tab']:.3f} "
          f"({report['api_1_tab_vs_cli']:+.1%}), API + {tabs} tabs {medians[f'api_{tabs}_tabs']:.3f} "
          f"({report['many_tabs_vs_1_tab']:+.1%} vs 1 tab); every tab got >= {report['fewest_updates_per_tab']} updates")
    return report


if __name__ == "__main__":
    main()
