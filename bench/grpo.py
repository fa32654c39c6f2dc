"""GRPO speed and learning: our path against a bare TRL ``GRPOTrainer`` script, and what 60 steps
teach the default model about arithmetic.

    python -m bench.grpo [--steps 10] [--pairs 2] [--quick] [--model DIR]       speed, A B A B
    python -m bench.grpo --learn [--steps 60] [--digits 1] [--learning-rate 2e-4] [--temperature 0.7]
                         [--num-generations 8] [--batch-size 16] [--beta 0.04] [--lora-dropout 0.0]
                                                                                 learning, ours only

Both sides train the default model (SmolLM2-135M-Instruct, or ``--model``'s folder) on the 200
arithmetic prompts of ``bench.arith_prompts`` (seed 0) with LoRA r16 / alpha 32 / dropout 0.05 on
all seven projections, 4 completions per prompt, 2 prompts per step (batch 8), completions of at
most 32 tokens at temperature 1.0, beta 0.04 (KL to the adapter-free reference), TRL's dapo loss,
learning rate ``LEARNING_RATE`` constant, fp32, no activation checkpointing, seed 42; the reward is
the numeric match of the final answer against the ``answer`` column (the studio's default reward;
the TRL script uses the same function).

- ours: the studio's own path (``data.prepared.prepare_data`` reads the prompts,
  ``training.grpo.build_grpo_trainer`` builds the trainer with our saves, callbacks and the live
  samples);
- TRL: a bare script as TRL's docs write it: the prompts mapped to conversational messages,
  ``GRPOConfig`` + ``GRPOTrainer`` + ``LoraConfig``.

Runs alternate A B A B, each in a fresh process (``--quick``: both in this process); only ``trainer.train()`` is timed. Reported per
run: steps / s and the reward per step (the curves should have the same shape: both sides sample
with the same seed), and the pre-flight check's estimate of those seconds (``estimate``).

``--learn``: one run of ours, the mean reward of the first and of the last 5 logged steps and the
completion lengths, at ``LEARN_SETTINGS`` unless a flag says otherwise: one-digit operands, 8
completions of each of 2 prompts a step (batch 16: a group of 8 is rarely all right or all wrong,
so most groups carry an advantage), temperature 0.7, no LoRA dropout (the completions are sampled
from the policy the loss trains). Prints one JSON line, then a human summary.
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
LEARNING_RATE = 2e-4
SETTINGS = {
    "batch_size": 8,
    "num_generations": 4,
    "max_completion_length": 32,
    "temperature": 1.0,
    "beta": 0.04,
    "learning_rate": LEARNING_RATE,
    "lr_scheduler_type": "constant",
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "random_seed": 42,
}
LEARN_SETTINGS = {"num_generations": 8, "batch_size": 16, "temperature": 0.7, "lora_dropout": 0.0}
TUNABLE = ("learning_rate", "temperature", "num_generations", "batch_size", "beta", "lora_dropout")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _log(sink: list[dict]) -> Any:
    from transformers import TrainerCallback

    class Callback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                length = logs.get("completions/mean_length")
                sink.append({"step": state.global_step, "reward": logs["reward"], "length": length})

    return Callback()


def _ours(model_dir: str, dataset: str, steps: int, out: Path, logs: list[dict]) -> Any:
    from transformers import AutoTokenizer

    from trainer_core.data.prepared import prepare_data
    from trainer_core.models.loading import load_model
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.training.grpo import build_grpo_trainer

    request = TrainingStartRequest(
        model_name=model_dir, local_datasets=[dataset], training_method="grpo", max_steps=steps, **SETTINGS
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = load_model(Path(model_dir), request, "cpu")
    data = prepare_data(request, tokenizer)
    return build_grpo_trainer(request, model, tokenizer, data.train, None, out, "cpu", [_log(logs)])


def _trl(model_dir: str, dataset: str, steps: int, out: Path, logs: list[dict]) -> Any:
    import datasets
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from trainer_core.rewards.library import make_reward
    from trainer_core.rewards.schemas import RewardSpec

    rows = datasets.load_dataset("json", data_files=dataset, split="train")
    rows = rows.map(lambda r: {"prompt": [{"role": "user", "content": r["prompt"]}]})
    args = GRPOConfig(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=SETTINGS["batch_size"],
        num_generations=SETTINGS["num_generations"],
        max_completion_length=SETTINGS["max_completion_length"],
        temperature=SETTINGS["temperature"],
        beta=SETTINGS["beta"],
        learning_rate=SETTINGS["learning_rate"],
        lr_scheduler_type="constant",
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
    reward = make_reward(RewardSpec(name="numeric_match", column="answer"), 32, "numeric_match:answer")
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32"),
        reward_funcs=[reward],
        args=args,
        train_dataset=rows,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        peft_config=lora,
        callbacks=[_log(logs)],
    )


def child(side: str, model_dir: str, dataset: str, steps: int) -> dict:
    """One run in this process (``SETTINGS`` as the parent set them); prints its JSON result line and
    returns it."""
    import torch

    torch.manual_seed(SETTINGS["random_seed"])
    logs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        trainer = (_ours if side == "ours" else _trl)(model_dir, dataset, steps, Path(tmp), logs)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    rewards = [round(e["reward"], 4) for e in logs]
    found = {
        "side": side,
        "seconds": round(seconds, 2),
        "steps_per_second": round(steps / seconds, 4),
        "rewards": rewards,
        "first5_reward": round(statistics.mean(rewards[:5]), 4),
        "last5_reward": round(statistics.mean(rewards[-5:]), 4),
        "mean_reward": round(statistics.mean(rewards), 4),
        "completion_lengths": [round(e["length"], 1) for e in logs if e["length"] is not None],
    }
    print(json.dumps(found))
    return found


def default_model() -> str:
    """The default model's folder (built from the bundled GGUF on first use)."""
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.settings import get_settings

    return str(materialize_default_model(get_settings().models_dir))


def estimate(model_dir: str, dataset: str, steps: int) -> dict:
    """The pre-flight time estimate of ours at ``SETTINGS`` (fresh settings: no run history, so the
    speed is the model's, from this machine's matmul rate): its generation and train-step parts and
    their sum, the seconds ``trainer.train()`` should take (``preflight.generation``, ``timing``)."""
    from trainer_core.preflight.check import run_preflight
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import Settings

    request = TrainingStartRequest(
        model_name=model_dir, local_datasets=[dataset], training_method="grpo", max_steps=steps, **SETTINGS
    )
    with tempfile.TemporaryDirectory() as tmp:
        folders = ",".join({str(Path(dataset).parent), str(Path(model_dir).parent)})
        report = run_preflight(request, Settings(data_dir=Path(tmp), allowed_paths=folders))
    parts = report.time.parts_seconds if report.time else {}
    train = parts.get("generation", 0.0) + parts.get("train_steps", 0.0)
    return {
        "parts_seconds": parts,
        "train_seconds": round(train, 1),
        "speed_source": report.time and report.time.speed_source,
    }


def _run(side: str, model_dir: str, dataset: str, steps: int, here: bool = False) -> dict:
    """One run of ``side`` in a fresh process (``here``: in this one, for --quick's check of the script)."""
    if here:
        found = child(side, model_dir, dataset, steps)
    else:
        command = [sys.executable, "-m", "bench.grpo", "--child", side, "--steps", str(steps)]
        command += ["--dataset", dataset, "--model", model_dir, "--settings", json.dumps(SETTINGS)]
        out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
        found = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"{side:5s} {found['seconds']:7.1f} s  {found['steps_per_second']:.4f} steps/s  first 5 reward "
        f"{found['first5_reward']:.3f}  last 5 {found['last5_reward']:.3f}",
        file=sys.stderr,
        flush=True,
    )
    return found


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the benchmark (``argv``: the command line's arguments); prints and returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (10; --learn: 60)")
    parser.add_argument("--pairs", type=int, default=2, help="A B pairs to run")
    parser.add_argument("--learn", action="store_true", help="one run of ours: does the reward rise?")
    parser.add_argument("--quick", action="store_true", help="2 steps, one A B pair (the test's smoke run)")
    parser.add_argument("--model", help="a model folder (default: the default model)")
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    parser.add_argument("--digits", type=int, choices=[1, 2], help="operand digits of the prompts (2; --learn: 1)")
    for name in TUNABLE:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=type(SETTINGS[name]),
            help=f"default {SETTINGS[name]}; --learn: {LEARN_SETTINGS.get(name, SETTINGS[name])}",
        )
    args = parser.parse_args(argv)
    SETTINGS.update(LEARN_SETTINGS if args.learn else {})
    SETTINGS.update(json.loads(args.settings) if args.settings else {})
    args.digits = args.digits or (1 if args.learn else 2)
    SETTINGS.update({name: getattr(args, name) for name in TUNABLE if getattr(args, name) is not None})
    steps = args.steps or (60 if args.learn else 10)
    if args.quick:
        steps, args.pairs = 2, 1
    model_dir = args.model or default_model()
    if args.child:
        child(args.child, model_dir, args.dataset, steps)
        return {}
    from bench.arith_prompts import write_rows

    with tempfile.TemporaryDirectory() as tmp:
        dataset = str(write_rows(Path(tmp) / "arith_prompts.json", 200, seed=0, digits=args.digits))
        if args.learn:
            found = _run("ours", model_dir, dataset, steps)
            report = {"bench": "grpo-learn", "model": model_dir, "steps": steps, "digits": args.digits}
            report.update(settings=SETTINGS, run=found, estimate=estimate(model_dir, dataset, steps))
            print(json.dumps(report))
            print(f"mean reward: first 5 steps {found['first5_reward']:.3f}, last 5 {found['last5_reward']:.3f}")
            print(
                f"pre-flight estimate {report['estimate']['train_seconds']:.0f} s vs {found['seconds']:.0f} s measured"
            )
            return report
        pairs = [side for _ in range(args.pairs) for side in ("ours", "trl")]
        results = [_run(side, model_dir, dataset, steps, here=args.quick) for side in pairs]
        estimated = estimate(model_dir, dataset, steps)  # while the prompts file exists
    rate = {
        side: statistics.median(r["steps_per_second"] for r in results if r["side"] == side) for side in ("ours", "trl")
    }
    report = {
        "bench": "grpo",
        "model": model_dir,
        "steps": steps,
        "settings": SETTINGS,
        "runs": results,
        "median_steps_per_second": rate,
        "speed_ratio": rate["ours"] / rate["trl"],
        "same_rewards": all(r["rewards"] == results[0]["rewards"] for r in results),
        "estimate": estimated,
    }
    print(json.dumps(report))
    print(
        f"ours / TRL steps per second: {report['speed_ratio']:.3f}x (target: within 10 %, i.e. >= 0.90); "
        f"reward curves {'identical' if report['same_rewards'] else 'differ'}; pre-flight estimate "
        f"{estimated['train_seconds']:.0f} s for ours' {statistics.median(r['seconds'] for r in results if r['side'] == 'ours'):.0f} s"
    )
    return report


if __name__ == "__main__":
    main()
