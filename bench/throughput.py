"""Training throughput: our trainer against a bare TRL ``SFTTrainer`` script at identical settings.

    python -m bench.throughput [--steps 30] [--pairs 2] [--quick] [--dataset FILE] [--model DIR]

Both sides train the default model (SmolLM2-135M-Instruct, or ``--model``'s folder) with LoRA r16 / alpha 32 / dropout 0 (our default and PEFT's)
on all seven projections, batch 4, max_seq_length 256, answer-only loss, no activation
checkpointing, seed 42; ours in the precision its ``mixed_precision`` chooses (``--mixed-precision``,
default auto: bf16 on a CPU whose bf16 units pay), TRL in fp32 as its users run it on a CPU; on the same Alpaca file, for ``--steps`` optimizer steps. Runs alternate
A B A B (ours, TRL, ours, TRL, ...), each in a fresh process so neither inherits the other's caches
(``--quick``, a check of the script and not of the figures: both in this process, no process start);
only ``trainer.train()`` is timed (model load and tokenization are outside the clock).

Reported: samples/s and tokens/s (tokens fed, and tokens without padding) per run, medians and
pairwise ratios, the padding fraction, peak RSS, the mean of the last 5 logged losses of each side
(target: within 0.02), and model FLOP/s as a fraction of the fp32 matmul rate measured in the same
process (sustained 2048-square products, before and after training; the higher), plus the bf16
matmul rate, and each side's MFU against the rate of the dtype it computes in (``dtype_mfu``). FLOPs follow PaLM's model-FLOPs-utilization count (Chowdhery et al. 2022, appendix B) with
LoRA's 4 N instead of 6 N (frozen weights need no weight gradients): per row of n tokens,
4 N n + 12 L d n^2, N = every matmul weight a token passes (blocks + LM head), L layers, d width.
"executed" MFU counts the LM head only where each side runs it (ours: labelled positions only).

Prints one JSON line, then a human summary.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from bench.flops import matmul_gflops, model_flops

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"
SETTINGS = {
    "batch_size": 4,
    "max_seq_length": 256,
    "learning_rate": 2e-4,
    "lr_scheduler_type": "cosine",
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "random_seed": 42,
    "mixed_precision": "auto",  # ours only: TRL runs fp32 on CPU, as its users run it there
}  # our schema's defaults
QUICK_BATCH, QUICK_SEQ = 2, 256  # --quick: a smoke run of the script (half the work of a step)
MODEL: dict[str, Optional[str]] = {"path": None}  # --model: another model's folder (the tests' tiny one)
PROBES = {"seconds": 3.0, "bf16_seconds": 3.0, "bf16_size": 2048}  # matmul rate probes; --quick: short ones
QUICK_PROBES = {"seconds": 0.3, "bf16_seconds": 0.1, "bf16_size": 256}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


# ----- child side: one training run, reported as a JSON line -----


class BatchCounter:
    """Wraps a data collator and records, per batch, the tokens fed (padding included), the row
    lengths (real tokens; for the attention FLOPs) and the labelled positions (where our trainer
    runs the LM head)."""

    def __init__(self, collate: Any) -> None:
        self.collate = collate
        self.batches: list[tuple[int, list[int], int]] = []  # (tokens fed, row lengths, labelled)

    def __call__(self, examples: list[dict]) -> dict:
        batch = self.collate(examples)
        if "attention_mask" in batch:
            lengths = batch["attention_mask"].sum(dim=1).tolist()
        else:
            lengths = batch["cu_seq_lens_q"].diff().tolist()
        labelled = int((batch["labels"][..., 1:] != -100).sum())
        self.batches.append((batch["input_ids"].numel(), lengths, labelled))
        return batch


def _loss_recorder() -> Any:
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                self.losses.append(float(logs["loss"]))

    return Recorder()


def _request(dataset: str, steps: int) -> Any:
    from trainer_core.schemas import TrainingStartRequest

    return TrainingStartRequest(
        local_datasets=[dataset],
        max_steps=steps,
        target_modules=TARGETS,
        gradient_checkpointing=False,
        train_on_completions=True,
        **SETTINGS,
    )


def _model_path() -> Path:
    """``--model``'s folder, else the default model's (built from the bundled GGUF when the hub is
    out of reach)."""
    if MODEL["path"]:
        return Path(MODEL["path"])
    from trainer_core.models import loading as models
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import get_settings

    name = TrainingStartRequest.model_fields["model_name"].default
    return models.resolve_model_path(name, None, get_settings().models_dir)


def build_ours(dataset: str, steps: int, out: Path) -> tuple[Any, Any]:
    """Our trainer exactly as the worker builds it. Returns (trainer, loss recorder)."""
    from trainer_core.data.prepared import prepare_data
    from trainer_core.models import loading as models
    from trainer_core.training.trainer import build_trainer

    request = _request(dataset, steps)
    device = models.pick_device()
    tokenizer = models.load_tokenizer(_model_path())
    model = models.load_model(_model_path(), request, device)
    data = prepare_data(request, tokenizer)
    recorder = _loss_recorder()
    return build_trainer(request, model, tokenizer, data.train, None, out, device, [recorder]), recorder


def build_trl(dataset: str, steps: int, out: Path) -> tuple[Any, Any]:
    """The bare TRL script: ``SFTTrainer`` with TRL's collator, loss and defaults except fp32, no
    activation checkpointing and the shared hyperparameters. It is given the same token ids and
    answer mask as our side (TRL's pre-tokenized path: ``input_ids`` + ``completion_mask``), so both
    sides optimise the same objective. (TRL's own chat-template tokenization would also train the
    newline after each ``<|im_end|>``: one easy extra token per row, which moves the mean loss by
    about 1 %.) Returns (trainer, loss recorder)."""
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    from trainer_core.data.prepared import prepare_data
    from trainer_core.models import loading as models

    path = _model_path()
    tokenizer = models.load_tokenizer(path)
    rows = prepare_data(_request(dataset, steps), tokenizer).train
    rows = rows.map(
        lambda row: {"completion_mask": [int(label != -100) for label in row["labels"]]}, remove_columns=["labels"]
    )
    args = SFTConfig(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=SETTINGS["batch_size"],
        max_length=SETTINGS["max_seq_length"],
        learning_rate=SETTINGS["learning_rate"],
        lr_scheduler_type=SETTINGS["lr_scheduler_type"],
        seed=SETTINGS["random_seed"],
        bf16=False,
        activation_checkpointing=False,
        use_cpu=not torch.cuda.is_available(),
        completion_only_loss=True,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    lora = LoraConfig(
        r=SETTINGS["lora_r"],
        lora_alpha=SETTINGS["lora_alpha"],
        lora_dropout=SETTINGS["lora_dropout"],
        target_modules=TARGETS,
        task_type="CAUSAL_LM",
    )
    recorder = _loss_recorder()
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[recorder],
    )
    return trainer, recorder


def run_child(side: str, dataset: str, steps: int) -> dict:
    """Build ``side``'s trainer, time ``train()``, and report the figures of this one run."""
    peak_before = matmul_gflops(seconds=PROBES["seconds"])
    with tempfile.TemporaryDirectory() as out:
        trainer, recorder = (build_ours if side == "ours" else build_trl)(dataset, steps, Path(out))
        counter = BatchCounter(trainer.data_collator)
        trainer.data_collator = counter
        began = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - began
    used = counter.batches[
        : trainer.state.global_step * trainer.args.gradient_accumulation_steps
    ]  # not the prefetched one
    rows = [lengths for _, lengths, _ in used]
    fed, real = sum(n for n, _, _ in used), sum(sum(lengths) for lengths in rows)
    base = trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") else trainer.model
    flops = model_flops(base, rows)
    executed = model_flops(base, rows, sum(labelled for _, _, labelled in used)) if side == "ours" else flops
    samples = sum(len(lengths) for lengths in rows)
    peak = max(peak_before, matmul_gflops(seconds=PROBES["seconds"]))  # before and after training: the quieter
    bf16 = matmul_gflops("bfloat16", size=int(PROBES["bf16_size"]), seconds=PROBES["bf16_seconds"])
    precision = "bf16" if trainer.args.bf16 else "fp32"
    dtype_peak = bf16 if precision == "bf16" else peak  # MFU against the rate of the dtype the run computes in
    return {
        "side": side,
        "steps": steps,
        "train_s": round(seconds, 2),
        "samples": samples,
        "samples_per_s": round(samples / seconds, 4),
        "tokens_fed": fed,
        "tokens_real": real,
        "tokens_per_s": round(real / seconds, 1),
        "padding_fraction": round(1 - real / fed, 4),
        "losses": [round(loss, 4) for loss in recorder.losses],
        "last5_loss": round(statistics.fmean(recorder.losses[-5:]), 4),
        "model_gflops_per_s": round(flops / seconds / 1e9, 1),
        "matmul_peak_gflops_per_s": round(peak, 1),
        "mfu": round(flops / seconds / 1e9 / peak, 3),
        "executed_mfu": round(executed / seconds / 1e9 / peak, 3),
        "bf16_matmul_gflops_per_s": round(bf16, 1),
        "precision": precision,
        "dtype_mfu": round(flops / seconds / 1e9 / dtype_peak, 3),
        "executed_dtype_mfu": round(executed / seconds / 1e9 / dtype_peak, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


# ----- parent side: alternate runs, summarise -----


def _spawn(side: str, dataset: str, steps: int, quick: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.throughput",
            "--child",
            side,
            "--dataset",
            dataset,
            "--steps",
            str(steps),
            "--lora-dropout",
            str(SETTINGS["lora_dropout"]),
            "--batch-size",
            str(SETTINGS["batch_size"]),
            "--max-seq-length",
            str(SETTINGS["max_seq_length"]),
            "--mixed-precision",
            str(SETTINGS["mixed_precision"]),
            *(["--model", MODEL["path"]] if MODEL["path"] else []),
            *(["--quick"] if quick else []),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{side} run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict]) -> dict:
    """Medians per side, pairwise ours/TRL samples/s ratios, loss agreement."""
    ours = [r for r in runs if r["side"] == "ours"]
    trl = [r for r in runs if r["side"] == "trl"]
    med = lambda side, key: statistics.median(r[key] for r in side)  # noqa: E731
    ratios = [round(a["samples_per_s"] / b["samples_per_s"], 3) for a, b in zip(ours, trl)]
    return {
        "median_samples_per_s": {"ours": med(ours, "samples_per_s"), "trl": med(trl, "samples_per_s")},
        "median_tokens_per_s": {"ours": med(ours, "tokens_per_s"), "trl": med(trl, "tokens_per_s")},
        "pair_ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "padding_fraction": {"ours": med(ours, "padding_fraction"), "trl": med(trl, "padding_fraction")},
        "peak_rss_mib": {"ours": med(ours, "peak_rss_mib"), "trl": med(trl, "peak_rss_mib")},
        "mfu": {"ours": med(ours, "mfu"), "trl": med(trl, "mfu")},
        "executed_mfu": {"ours": med(ours, "executed_mfu"), "trl": med(trl, "executed_mfu")},
        "precision": {"ours": ours[0]["precision"], "trl": trl[0]["precision"]},
        "dtype_mfu": {"ours": med(ours, "dtype_mfu"), "trl": med(trl, "dtype_mfu")},
        "executed_dtype_mfu": {"ours": med(ours, "executed_dtype_mfu"), "trl": med(trl, "executed_dtype_mfu")},
        "matmul_gflops_per_s": {
            "float32": med(runs, "matmul_peak_gflops_per_s"),
            "bfloat16": med(runs, "bf16_matmul_gflops_per_s"),
        },
        "last5_loss": {"ours": med(ours, "last5_loss"), "trl": med(trl, "last5_loss")},
        "loss_gap": round(abs(med(ours, "last5_loss") - med(trl, "last5_loss")), 4),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps per run (default 30)")
    parser.add_argument("--pairs", type=int, default=2, help="A/B pairs, run alternated (default 2)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2 steps of 2 rows, 1 pair: checks the script, not the figures",
    )
    parser.add_argument("--batch-size", type=int, default=SETTINGS["batch_size"], help="rows per step (default 4)")
    parser.add_argument(
        "--max-seq-length", type=int, default=SETTINGS["max_seq_length"], help="tokens per row at most (default 256)"
    )
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--model", help="a model folder to train instead of the default model")
    parser.add_argument(
        "--lora-dropout",
        type=float,
        default=SETTINGS["lora_dropout"],
        help="LoRA dropout on both sides (default: the schema's default)",
    )
    parser.add_argument(
        "--mixed-precision",
        default="auto",
        choices=["auto", "bf16", "no"],
        help="our side's mixed_precision (default auto: bf16 where this CPU's bf16 units pay; no: fp32, "
        "as on a CPU without them). TRL runs fp32 either way",
    )
    parser.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    SETTINGS["lora_dropout"] = args.lora_dropout
    SETTINGS["mixed_precision"] = args.mixed_precision
    MODEL["path"] = args.model
    if args.quick:
        args.batch_size, args.max_seq_length = QUICK_BATCH, QUICK_SEQ
        PROBES.update(QUICK_PROBES)
    SETTINGS["batch_size"], SETTINGS["max_seq_length"] = args.batch_size, args.max_seq_length
    if args.child:
        report = run_child(args.child, args.dataset, args.steps)
        print(json.dumps(report))
        return report
    steps, pairs = (2, 1) if args.quick else (args.steps, args.pairs)
    runs = []
    for _ in range(pairs):
        for side in ("ours", "trl"):
            # --quick checks the script: both sides in this process (no process start per side)
            runs.append(
                run_child(side, args.dataset, steps) if args.quick else _spawn(side, args.dataset, steps, args.quick)
            )
            print(f"# {side}: {runs[-1]['samples_per_s']} samples/s, loss {runs[-1]['last5_loss']}", file=sys.stderr)
    report = {
        "bench": "throughput",
        "dataset": Path(args.dataset).name,
        "steps": steps,
        "pairs": pairs,
        "settings": SETTINGS,
        **summarise(runs),
        "runs": runs,
    }
    print(json.dumps(report))
    _print_summary(report)
    return report


def _print_summary(r: dict) -> None:
    s, t = r["median_samples_per_s"], r["median_tokens_per_s"]
    print(
        f"ours {s['ours']:.3f} samples/s ({t['ours']:.0f} real tokens/s) vs bare TRL {s['trl']:.3f} samples/s "
        f"({t['trl']:.0f} tokens/s): {r['median_ratio']:.2f}x (pairs {r['pair_ratios']})"
    )
    print(
        f"padding {r['padding_fraction']['ours']:.1%} vs {r['padding_fraction']['trl']:.1%}; peak RSS "
        f"{r['peak_rss_mib']['ours']} vs {r['peak_rss_mib']['trl']} MiB; MFU {r['mfu']['ours']:.1%} vs {r['mfu']['trl']:.1%} "
        f"(executed FLOPs: {r['executed_mfu']['ours']:.1%} vs {r['executed_mfu']['trl']:.1%})"
    )
    print(
        f"fp32 matmul {r['matmul_gflops_per_s']['float32']:.0f} GFLOP/s, bf16 {r['matmul_gflops_per_s']['bfloat16']:.0f} GFLOP/s; "
        f"ours computes in {r['precision']['ours']}: MFU against that dtype's rate {r['dtype_mfu']['ours']:.1%} "
        f"(executed {r['executed_dtype_mfu']['ours']:.1%}); TRL in {r['precision']['trl']}: {r['dtype_mfu']['trl']:.1%}"
    )
    print(
        f"last-5 mean loss {r['last5_loss']['ours']} vs {r['last5_loss']['trl']} (gap {r['loss_gap']}, target <= 0.02)"
    )


if __name__ == "__main__":
    main()
