"""Where a training step's time goes: ``torch.profiler`` over our trainer's steps, per operator.

    python -m bench.profile_step [--steps 4] [--warmup 2] [--mixed-precision auto|bf16|no]
                                 [--lora-dropout 0.0] [--rows 30] [--model DIR]

Builds our trainer exactly as ``bench/throughput.py`` does (the default model, alpaca_en_demo, LoRA
r16 on all seven projections, batch 4, max length 256, answer-only loss), trains ``--warmup`` steps
unprofiled, then profiles ``--steps`` steps (CPU activities) and prints one JSON line, then a
Markdown table of the ``--rows`` operators with the most self time: milliseconds per step, share of
the profiled time, calls per step. Self time is time spent in the operator itself, not in the
operators it calls (``torch.profiler``'s ``self_cpu_time_total``); shares add up to 100 % over all
operators.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench import throughput


def profile(steps: int, warmup: int, rows: int) -> dict:
    """Train ``warmup`` steps, profile ``steps`` more; returns {"seconds_per_step", "ops": [...]}
    with each op's name, self milliseconds per step, share of all self time and calls per step."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    from transformers import TrainerCallback

    class Window(TrainerCallback):
        """Starts the profiler at the end of the warm-up steps and stops it after ``steps`` more."""

        def __init__(self) -> None:
            self.prof = torch_profile(activities=[ProfilerActivity.CPU])

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == warmup:
                self.prof.__enter__()
            elif state.global_step == warmup + steps:
                self.prof.__exit__(None, None, None)

    with tempfile.TemporaryDirectory() as out:
        trainer, _ = throughput.build_ours(str(throughput.DEFAULT_DATASET), warmup + steps + 1, Path(out))
        window = Window()
        trainer.add_callback(window)
        trainer.train()
    events = window.prof.key_averages()
    total_us = sum(e.self_cpu_time_total for e in events)
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:rows]
    return {
        "bench": "profile_step",
        "settings": throughput.SETTINGS,
        "precision": trainer.args.bf16 and "bf16" or "fp32",
        "steps": steps,
        "seconds_per_step": round(total_us / 1e6 / steps, 3),
        "ops": [
            {
                "op": e.key,
                "ms_per_step": round(e.self_cpu_time_total / 1e3 / steps, 1),
                "share": round(e.self_cpu_time_total / total_us, 4),
                "calls_per_step": round(e.count / steps, 1),
            }
            for e in top
        ],
    }


def markdown(report: dict) -> str:
    """The report's operators as a Markdown table."""
    lines = ["| Operator | ms / step | Share | Calls / step |", "|---|---:|---:|---:|"]
    for op in report["ops"]:
        lines.append(f"| `{op['op'][:60]}` | {op['ms_per_step']:.1f} | {op['share']:.1%} | {op['calls_per_step']:g} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="profiled steps (default 4)")
    parser.add_argument("--warmup", type=int, default=2, help="unprofiled steps first (default 2)")
    parser.add_argument("--rows", type=int, default=30, help="operators listed (default 30)")
    parser.add_argument("--mixed-precision", default="auto", choices=["auto", "bf16", "no"])
    parser.add_argument("--lora-dropout", type=float, default=throughput.SETTINGS["lora_dropout"])
    parser.add_argument("--model", help="a model folder to train instead of the default model")
    args = parser.parse_args(argv)
    throughput.SETTINGS["mixed_precision"] = args.mixed_precision
    throughput.SETTINGS["lora_dropout"] = args.lora_dropout
    throughput.MODEL["path"] = args.model
    report = profile(args.steps, args.warmup, args.rows)
    print(json.dumps(report))
    print(f"{report['precision']}: {report['seconds_per_step']} s of operator self time per step")
    print(markdown(report))
    return report


if __name__ == "__main__":
    main()
