"""Preference training speed and quality: our DPO path against a bare TRL ``DPOTrainer`` script.

    python -m bench.preference [--steps 30] [--pairs 2] [--method dpo] [--only ours|trl] [--quick] [--model DIR]

Both sides train the default model (SmolLM2-135M-Instruct, or ``--model``'s folder) with LoRA r16 / alpha 32 / dropout 0.05 on
all seven projections, batch 2, max_length 256, beta 0.1, sigmoid loss, learning rate 5e-5 constant,
fp32, no activation checkpointing, seed 42, on ``dpo_en_demo.json``, for ``--steps`` optimizer steps.

- ours: the studio's own path (``data.prepared.prepare_data`` reads the ShareGPT pairs,
  ``training.preference.build_preference_trainer`` builds the trainer with our saves and callbacks);
- TRL: a bare script as TRL's docs write it: the rows mapped to conversational prompt / chosen /
  rejected in three lines, ``DPOConfig`` + ``DPOTrainer`` + ``LoraConfig``.

Runs alternate A B A B, each in a fresh process (``--quick``: both in this process); only ``trainer.train()`` is timed. Reported per
run: samples (pairs) / s, the mean of the last 5 logged losses (target: within 0.02 of TRL's), and
the last logged reward accuracy and margin (with ``--steps 100``: the quality target, accuracy
above 0.5 and margin above 0). TRL 1.16's ``DPOTrainer`` has no padding-free path (it falls back to
padding), so both sides pad; our SFT padding-free work does not apply here.

Prints one JSON line, then a human summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "dpo_en_demo.json"
SETTINGS = {
    "batch_size": 2,
    "max_seq_length": 256,
    "learning_rate": 5e-5,
    "lr_scheduler_type": "constant",
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "random_seed": 42,
    "beta": 0.1,
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class LossLog:
    """A ``TrainerCallback`` (built lazily) collecting the logged loss, accuracy and margin per step."""

    @staticmethod
    def make(sink: list[dict]) -> Any:
        from transformers import TrainerCallback

        class Callback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "loss" in logs:
                    sink.append(
                        {
                            "step": state.global_step,
                            "loss": logs["loss"],
                            "accuracy": logs.get("rewards/accuracies"),
                            "margin": logs.get("rewards/margins"),
                        }
                    )

        return Callback()


def _ours(model_dir: str, dataset: str, steps: int, method: str, out: Path, logs: list[dict]) -> Any:
    from trainer_core.data.prepared import prepare_data
    from trainer_core.models.loading import load_model, load_tokenizer
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.training.preference import build_preference_trainer

    request = TrainingStartRequest(
        model_name=model_dir, local_datasets=[dataset], training_method=method, max_steps=steps, **SETTINGS
    )
    tokenizer = load_tokenizer(Path(model_dir))
    model = load_model(Path(model_dir), request, "cpu")
    data = prepare_data(request, tokenizer)
    return build_preference_trainer(request, model, tokenizer, data.train, None, out, "cpu", [LossLog.make(logs)])


def _trl(model_dir: str, dataset: str, steps: int, out: Path, logs: list[dict]) -> Any:
    import datasets
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    roles = {"human": "user", "gpt": "assistant", "system": "system"}
    rows = datasets.load_dataset("json", data_files=dataset, split="train")
    rows = rows.map(
        lambda r: {
            "prompt": [{"role": roles[t["from"]], "content": t["value"]} for t in r["conversations"]],
            "chosen": [{"role": "assistant", "content": r["chosen"]["value"]}],
            "rejected": [{"role": "assistant", "content": r["rejected"]["value"]}],
        },
        remove_columns=["conversations"],
    )
    args = DPOConfig(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=SETTINGS["batch_size"],
        learning_rate=SETTINGS["learning_rate"],
        lr_scheduler_type="constant",
        max_length=SETTINGS["max_seq_length"],
        beta=SETTINGS["beta"],
        seed=SETTINGS["random_seed"],
        data_seed=SETTINGS["random_seed"],
        logging_steps=1,
        bf16=False,
        use_cpu=True,
        gradient_checkpointing=False,
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
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32", attn_implementation="sdpa")
    return DPOTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        peft_config=lora,
        callbacks=[LossLog.make(logs)],
    )


def child(side: str, model_dir: str, dataset: str, steps: int, method: str) -> dict:
    """One run in this process; prints its JSON result line and returns it."""
    import torch

    torch.manual_seed(SETTINGS["random_seed"])
    logs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        trainer = (
            _ours(model_dir, dataset, steps, method, Path(tmp), logs)
            if side == "ours"
            else _trl(model_dir, dataset, steps, Path(tmp), logs)
        )
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    last = logs[-5:]
    found = {
        "side": side,
        "seconds": round(seconds, 2),
        "pairs_per_second": round(steps * SETTINGS["batch_size"] / seconds, 3),
        "last5_loss": round(statistics.mean(e["loss"] for e in last), 4),
        "last_accuracy": last[-1]["accuracy"],
        "last_margin": last[-1]["margin"],
        "mean_last10_accuracy": round(statistics.mean(e["accuracy"] for e in logs[-10:]), 3),
        "mean_last10_margin": round(statistics.mean(e["margin"] for e in logs[-10:]), 4),
        "losses": [round(e["loss"], 4) for e in logs],
    }
    print(json.dumps(found))
    return found


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the benchmark (``argv``: the command line's arguments); prints and returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=2, help="A B pairs to run")
    parser.add_argument("--method", default="dpo", help="our side's training_method (TRL's side is always DPO)")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--only", choices=["ours", "trl"], help="run one side only (e.g. a quality run)")
    parser.add_argument(
        "--quick", action="store_true", help="2 steps of pairs cut to 128 tokens, one A B pair (the test's smoke run)"
    )
    parser.add_argument(
        "--max-seq-length", type=int, default=SETTINGS["max_seq_length"], help="tokens per row at most (default 256)"
    )
    parser.add_argument("--model", help="a model folder to train instead of the default model")
    parser.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.pairs, args.max_seq_length = 2, 1, 128
    SETTINGS["max_seq_length"] = args.max_seq_length
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.settings import get_settings

    model_dir = args.model or str(materialize_default_model(get_settings().models_dir))
    if args.child:
        child(args.child, model_dir, args.dataset, args.steps, args.method)
        return {}
    sides = [args.only] if args.only else ["ours", "trl"]
    results = []
    for _ in range(args.pairs):
        for side in sides:
            if args.quick:  # a check of the script, not of the figures: both sides in this process
                results.append(child(side, model_dir, args.dataset, args.steps, args.method))
                continue
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.preference",
                    "--child",
                    side,
                    "--steps",
                    str(args.steps),
                    "--method",
                    args.method,
                    "--dataset",
                    args.dataset,
                    "--max-seq-length",
                    str(args.max_seq_length),
                    "--model",
                    model_dir,
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(
                f"{side:5s} {results[-1]['seconds']:7.1f} s  {results[-1]['pairs_per_second']:.3f} pairs/s  "
                f"last5 loss {results[-1]['last5_loss']:.4f}  accuracy {results[-1]['last_accuracy']}  "
                f"margin {results[-1]['last_margin']}",
                file=sys.stderr,
                flush=True,
            )
    summary = {
        side: {
            "median_pairs_per_second": statistics.median(r["pairs_per_second"] for r in results if r["side"] == side),
            "last5_loss": [r["last5_loss"] for r in results if r["side"] == side],
        }
        for side in sides
    }
    report = {
        "bench": "preference",
        "steps": args.steps,
        "method": args.method,
        "settings": SETTINGS,
        "runs": results,
        "summary": summary,
    }
    if len(sides) == 2:
        report["speed_ratio"] = summary["ours"]["median_pairs_per_second"] / summary["trl"]["median_pairs_per_second"]
        report["last5_loss_gap"] = abs(
            statistics.mean(summary["ours"]["last5_loss"]) - statistics.mean(summary["trl"]["last5_loss"])
        )
    print(json.dumps(report))
    if len(sides) == 2:
        print(
            f"ours / TRL speed: {report['speed_ratio']:.3f}x; last-5 loss gap {report['last5_loss_gap']:.4f} "
            "(target <= 0.02)"
        )
    return report


if __name__ == "__main__":
    main()
