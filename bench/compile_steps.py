"""Does ``torch.compile`` of the decoder layers pay? Compilation time against time saved per step.

    python -m bench.compile_steps [--steps 12] [--model DIR]

Trains our trainer (the ``bench/throughput.py`` settings) for ``--steps`` steps eagerly, then with
each decoder layer compiled (``nn.Module.compile(dynamic=True)``: one graph reused by every layer
and row length; a layer that fails to compile runs eagerly), each in a fresh process on the same
batches. Reported: each side's step times; the compilation cost (the compiled run's first step less
the eager run's) and the time saved per step after it (sum over steps 4 to N of eager less
compiled, over N - 3); the break-even step count (cost / saving; None when nothing is saved); the
largest loss gap. Prints one JSON line, then a summary. The trainer does not compile: on this CPU
the compiled layers were slower than the eager ones (docs/BENCHMARKS.md, issue 31).
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

from bench import throughput

REPO = Path(__file__).resolve().parents[1]


def child(setting: str, steps: int) -> dict:
    """One run, eager (``setting`` off) or with the decoder layers compiled (on): step times (s),
    losses and how many layers were compiled."""
    import torch._dynamo
    from transformers import TrainerCallback

    class StepTimes(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.began = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self.began)

    compiled = 0
    with tempfile.TemporaryDirectory() as out:
        trainer, recorder = throughput.build_ours(str(throughput.DEFAULT_DATASET), steps, Path(out))
        if setting == "on":
            from trainer_core.models.targets import find_blocks

            _, layers = find_blocks(trainer.model)  # the decoder layers, as LoRA's targets find them
            torch._dynamo.config.suppress_errors = True
            for layer in layers:
                layer.compile(dynamic=True)
            compiled = len(layers)
        timer = StepTimes()
        trainer.add_callback(timer)
        trainer.train()
    return {
        "compiled": setting,
        "layers_compiled": compiled,
        "step_s": [round(t, 3) for t in timer.times],
        "losses": [round(v, 4) for v in recorder.losses],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--model", help="a model folder to train instead of the default model")
    parser.add_argument("--child", choices=["off", "on"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    throughput.MODEL["path"] = args.model
    if args.child:
        report = child(args.child, args.steps)
        print(json.dumps(report))
        return report
    runs = {}
    for setting in ("off", "on"):
        command = [sys.executable, "-m", "bench.compile_steps", "--child", setting, "--steps", str(args.steps)]
        done = subprocess.run(
            command + (["--model", args.model] if args.model else []),
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false"},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the {setting} run failed:\n{done.stderr[-3000:]}")
        runs[setting] = json.loads(done.stdout.strip().splitlines()[-1])
    eager, compiled = runs["off"]["step_s"], runs["on"]["step_s"]
    cost = compiled[0] - eager[0]
    later = max(len(eager) - 3, 1)
    saved = (sum(eager[3:]) - sum(compiled[3:])) / later
    report = {
        "bench": "compile_steps",
        "steps": args.steps,
        "compile_cost_s": round(cost, 1),
        "saved_per_step_s": round(saved, 3),
        "speedup_after_compile": round(sum(eager[3:]) / max(sum(compiled[3:]), 1e-9), 3),
        "break_even_steps": round(cost / saved) if saved > 0 else None,
        "max_loss_gap": round(max(abs(a - b) for a, b in zip(runs["off"]["losses"], runs["on"]["losses"])), 4),
        "runs": runs,
    }
    print(json.dumps(report))
    print(
        f"compilation {report['compile_cost_s']} s, then {report['saved_per_step_s']} s saved per step "
        f"({report['speedup_after_compile']}x): pays after {report['break_even_steps']} steps; "
        f"largest loss gap {report['max_loss_gap']}"
    )
    return report


if __name__ == "__main__":
    main()
