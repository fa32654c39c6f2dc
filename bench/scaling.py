"""One process against several on this machine: the studio's own runner (``JobRunner``) trains the
same LoRA run once in one process and once in ``--processes`` processes (torchrun; gloo on CPU, one
process per GPU on GPUs), with the same global batch, seed and data.

    python -m bench.scaling [--steps 20] [--processes 2] [--global-batch 4] [--repeats 2] [--quick]

Defaults: SmolLM2-135M-Instruct, LoRA r16 on all seven projections, ``alpaca_en_demo.json``,
max_seq_length 128, learning rate 1e-3 linear, seed 7. The runs alternate (1, N, 1, N, ...) so that
drift in the machine's speed falls on both. Reported per run: training seconds (the trainer's own,
startup excluded), wall seconds (Start to the end: imports, loading, tokenizing, launching), samples
(rows) / s in total and per process, tokens / s in total, and the mean of the last 5 logged losses.
On a CPU the processes share the same cores (each gets ``cores // N`` threads), so no speed-up is
expected there; the figure that transfers to GPUs is the per-step overhead of the group.

Prints one JSON line (also written to ``--json``), then a human summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"


def run_once(processes: int, steps: int, global_batch: int, dataset: str, model: str, root: Path) -> dict[str, Any]:
    """Train one run through ``JobRunner`` and return its figures (raises RuntimeError if it fails)."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.schemas import TrainingStartRequest

    if global_batch % processes:
        raise ValueError(f"--global-batch {global_batch} does not split over {processes} processes")
    request = TrainingStartRequest(
        model_name=model,
        local_datasets=[dataset],
        max_seq_length=128,
        max_steps=steps,
        batch_size=global_batch // processes,
        num_processes=processes,
        learning_rate=1e-3,
        lr_scheduler_type="linear",
        random_seed=7,
    )
    runner = JobRunner(runs_dir=root)
    began = time.monotonic()
    started = runner.start(request)
    if started.status != "queued":
        raise RuntimeError(started.error)
    runner.wait()
    wall = time.monotonic() - began
    status = runner.status()
    if status.phase.value != "completed":
        raise RuntimeError(f"{processes} process(es): {status.message} {status.error}")
    seconds = status.details["elapsed_seconds"]
    losses = [loss for loss in status.metric_history.loss if loss is not None]
    samples = steps * global_batch / seconds
    return {
        "processes": processes,
        "training_seconds": round(seconds, 2),
        "wall_seconds": round(wall, 2),
        "samples_per_second": round(samples, 3),
        "samples_per_second_per_process": round(samples / processes, 3),
        "tokens_per_second": round(status.details["tokens_per_second"], 1)
        if status.details.get("tokens_per_second")
        else None,
        "last5_loss": round(statistics.mean(losses[-5:]), 4),
        "steps": len(losses),
    }


def default_model() -> str:
    """The default model's folder (``scripts/setup.sh`` materializes it)."""
    return str(Path.home() / ".cache" / "finetune_studio" / "models" / "SmolLM2-135M-Instruct")


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the comparison; returns the report (also printed as one JSON line)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--global-batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="pairs of runs (1 process, then N)")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--quick", action="store_true", help="3 steps, one pair (a smoke test)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    steps, repeats = (3, 1) if args.quick else (args.steps, args.repeats)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for processes in (1, args.processes):
                runs.append(
                    run_once(processes, steps, args.global_batch, args.dataset, args.model, Path(tmp) / f"r{i}")
                )
    one = [r for r in runs if r["processes"] == 1]
    many = [r for r in runs if r["processes"] == args.processes]

    def median(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    report = {
        "bench": "scaling",
        "steps": steps,
        "global_batch": args.global_batch,
        "processes": args.processes,
        "runs": runs,
        "speedup": round(median(many, "samples_per_second") / median(one, "samples_per_second"), 3),
        "last5_loss_gap": round(abs(median(many, "last5_loss") - median(one, "last5_loss")), 4),
    }
    line = json.dumps(report)
    print(line)
    if args.json:
        args.json.write_text(line + "\n", encoding="utf-8")
    print(
        f"1 process: {median(one, 'samples_per_second'):.3f} samples/s; {args.processes} processes: "
        f"{median(many, 'samples_per_second'):.3f} samples/s in total, "
        f"{median(many, 'samples_per_second_per_process'):.3f} per process ({report['speedup']}x); "
        f"wall {median(one, 'wall_seconds'):.0f} s vs {median(many, 'wall_seconds'):.0f} s; "
        f"last-5 loss gap {report['last5_loss_gap']}",
        file=sys.stderr,
    )
    return report


if __name__ == "__main__":
    main()
