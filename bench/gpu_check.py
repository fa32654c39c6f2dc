"""The GPU check: our optimised training path against the plain one, on the machine's GPU.

    python -m bench.gpu_check [--steps 20] [--model DIR] [--device cuda|cpu]

Trains the default model (or ``--model``'s folder) with the ``bench/throughput.py`` settings
(alpaca_en_demo, LoRA r16 on all seven projections, batch 4, max length 256) twice, one after the
other in this process:
- plain: ``mixed_precision`` no (fp32), no Liger kernels, SDPA attention;
- optimised: what a run gets by default on this device (bf16 where supported, Liger's fused linear
  cross-entropy where ``liger_kernel`` is installed: ``training.kernels``, flash-attention's varlen
  kernel where ``flash_attn`` is: ``models.attention_choice``).
Prints one JSON line and a summary: samples/s, peak memory (``torch.cuda.max_memory_allocated`` on
CUDA, peak RSS on a CPU), the kernels used, and the largest per-step and last-5 loss gaps. Exits 1
when the last-5 mean losses differ by more than 0.02 (the check fails), 2 without a CUDA device
unless ``--device cpu`` (a smoke run of the script).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import throughput

TOLERANCE = 0.02


def run(side: str, steps: int, device: str) -> dict[str, Any]:
    """One training run of ``side`` ("plain" or "optimised"); returns its figures."""
    import torch
    import transformers.utils as hf_utils

    from trainer_core.training import trainer as trainer_module

    plain = side == "plain"
    throughput.SETTINGS["mixed_precision"] = "no" if plain else "auto"
    saved = (trainer_module.liger_applies, hf_utils.is_flash_attn_2_available)
    if plain:  # the stock path: no Liger, SDPA (attention_choice imports the check when it loads a model)
        trainer_module.liger_applies = lambda model, device: False
        hf_utils.is_flash_attn_2_available = lambda: False
    try:
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        with tempfile.TemporaryDirectory() as out:
            trainer, recorder = throughput.build_ours(str(throughput.DEFAULT_DATASET), steps, Path(out))
            began = time.perf_counter()
            trainer.train()
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - began
    finally:
        trainer_module.liger_applies, hf_utils.is_flash_attn_2_available = saved
    peak = (
        torch.cuda.max_memory_allocated() / 2**20
        if device == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    samples = steps * throughput.SETTINGS["batch_size"]
    return {
        "side": side,
        "precision": "bf16" if trainer.args.bf16 else "fp32",
        "liger": bool(trainer.args.use_liger_kernel),
        "attention": trainer.model.config._attn_implementation,
        "train_s": round(seconds, 2),
        "samples_per_s": round(samples / seconds, 3),
        "peak_memory_mib": round(peak),
        "losses": [round(loss, 4) for loss in recorder.losses],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--model", help="a model folder to train instead of the default model")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run this on a GPU machine (or --device cpu for a smoke run)", file=sys.stderr)
        return 2
    throughput.MODEL["path"] = args.model
    plain, fast = run("plain", args.steps, args.device), run("optimised", args.steps, args.device)
    gaps = [abs(a - b) for a, b in zip(plain["losses"], fast["losses"])]
    last5 = abs(statistics.fmean(plain["losses"][-5:]) - statistics.fmean(fast["losses"][-5:]))
    report = {
        "bench": "gpu_check",
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "steps": args.steps,
        "runs": [plain, fast],
        "speedup": round(fast["samples_per_s"] / plain["samples_per_s"], 3),
        "max_step_gap": round(max(gaps), 4),
        "last5_gap": round(last5, 4),
        "passed": last5 <= TOLERANCE,
    }
    print(json.dumps(report))
    for r in (plain, fast):
        print(
            f"{r['side']:>9}: {r['samples_per_s']} samples/s, peak {r['peak_memory_mib']} MiB, {r['precision']}, "
            f"liger {r['liger']}, attention {r['attention']}, last loss {r['losses'][-1]}"
        )
    print(
        f"speed-up {report['speedup']}x; last-5 loss gap {report['last5_gap']} (<= {TOLERANCE}: "
        f"{'passed' if report['passed'] else 'FAILED'}); largest step gap {report['max_step_gap']}"
    )
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
