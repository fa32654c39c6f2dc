"""Ray Train against torchrun: how long a run takes from Start to its first logged step, through the
studio's own runner (``JobRunner``), the same 2-process LoRA run launched both ways: torchrun on this
machine (``num_processes``) and Ray Train on a Ray cluster (``compute: ray``, ``num_workers``).

    python -m bench.ray_startup [--steps 4] [--workers 2] [--repeats 2] [--ray-address HOST:PORT] [--quick]

Without ``--ray-address`` it starts a local head for the runs (``ray start --head`` on 127.0.0.1,
one CPU a worker, no dashboard; its own start-up is not counted: a user's cluster is already up)
and stops it after. Runs alternate (torchrun, Ray, torchrun, Ray, ...). Reported per run: seconds
from Start to the first logged step (imports, loading, tokenizing, launching: what differs), wall
seconds to the end, and the logged losses. The issue's target: Ray's first step within 1.5x of
torchrun's (medians).

Defaults: SmolLM2-135M-Instruct, ``alpaca_en_demo.json``, batch 2 a process, max_seq_length 128,
seed 7. Prints one JSON line (also written to ``--json``), then a human summary.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from bench.scaling import DEFAULT_DATASET, default_model

RAY = Path(sys.executable).with_name("ray")
POLL_S = 0.05


@contextmanager
def local_head(cpus: int) -> Iterator[str]:
    """A Ray head on 127.0.0.1 with ``cpus`` CPUs for the runs; yields its address. Raises
    RuntimeError (with Ray's words) when it does not start."""
    ray = str(RAY) if RAY.exists() else shutil.which("ray")
    if ray is None:
        raise RuntimeError('the ray command is missing: pip install "finetune-studio[ray]"')
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = subprocess.run(
        [ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", str(cpus),
         "--include-dashboard=false", "--disable-usage-stats"],
        capture_output=True, text=True,
    )  # fmt: skip
    if started.returncode != 0:
        raise RuntimeError(f"ray start failed: {started.stderr[-800:]}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, timeout=120)


def run_once(how: str, steps: int, workers: int, model: str, dataset: str, address: str, root: Path) -> dict[str, Any]:
    """One run (``how``: "torchrun" or "ray") through ``JobRunner``; its figures. Raises RuntimeError
    when it does not complete."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.schemas import TrainingStartRequest

    launch = {"num_processes": workers} if how == "torchrun" else {
        "compute": "ray", "ray_address": address, "num_workers": workers
    }  # fmt: skip
    request = TrainingStartRequest(
        model_name=model, local_datasets=[dataset], max_seq_length=128, max_steps=steps, batch_size=2,
        random_seed=7, **launch,
    )  # fmt: skip
    runner = JobRunner(runs_dir=root)
    began = time.monotonic()
    started = runner.start(request)
    if started.status != "queued":
        raise RuntimeError(started.error)
    first_step = None
    while runner.status(with_history=False).is_training_running:
        if first_step is None and (runner.status(with_history=False).details.get("step") or 0) >= 1:
            first_step = time.monotonic() - began
        time.sleep(POLL_S)
    wall = time.monotonic() - began
    status = runner.status()
    if status.phase.value != "completed":
        raise RuntimeError(f"{how}: {status.message} {status.error}")
    losses = [round(loss, 4) for loss in status.metric_history.loss if loss is not None]
    return {
        "how": how,
        "first_step_seconds": round(first_step if first_step is not None else wall, 2),
        "wall_seconds": round(wall, 2),
        "losses": losses,
    }


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the comparison; returns the report (also printed as one JSON line)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="pairs of runs (torchrun, then Ray)")
    parser.add_argument("--ray-address", help="a running cluster (default: start a local head)")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--quick", action="store_true", help="1 step, one pair (a smoke test)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    steps, repeats = (1, 1) if args.quick else (args.steps, args.repeats)
    runs: list[dict[str, Any]] = []

    def pairs(address: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(repeats):
                for how in ("torchrun", "ray"):
                    runs.append(run_once(how, steps, args.workers, args.model, args.dataset, address,
                                         Path(tmp) / f"{how}{i}"))  # fmt: skip

    if args.ray_address:
        pairs(args.ray_address)
    else:
        with local_head(args.workers) as address:
            pairs(address)

    def median(how: str, key: str) -> float:
        return statistics.median(r[key] for r in runs if r["how"] == how)

    ratio = median("ray", "first_step_seconds") / median("torchrun", "first_step_seconds")
    report = {
        "bench": "ray_startup",
        "steps": steps,
        "workers": args.workers,
        "runs": runs,
        "first_step_ratio": round(ratio, 3),
        "target": 1.5,
        "losses_agree": all(
            abs(a - b) <= 0.01
            for t, r in zip((x for x in runs if x["how"] == "torchrun"), (x for x in runs if x["how"] == "ray"))
            for a, b in zip(t["losses"], r["losses"])
        ),
    }
    line = json.dumps(report)
    print(line)
    if args.json:
        args.json.write_text(line + "\n", encoding="utf-8")
    print(
        f"Start to first step: torchrun {median('torchrun', 'first_step_seconds'):.1f} s, Ray Train "
        f"{median('ray', 'first_step_seconds'):.1f} s ({report['first_step_ratio']}x; target <= 1.5x); wall "
        f"{median('torchrun', 'wall_seconds'):.1f} s vs {median('ray', 'wall_seconds'):.1f} s; "
        f"losses agree within 0.01: {report['losses_agree']}",
        file=sys.stderr,
    )
    return report


if __name__ == "__main__":
    main()
