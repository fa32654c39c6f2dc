"""Vision-language training speed: our path against a bare TRL ``SFTTrainer`` script.

    python -m bench.vision [--steps 20] [--pairs 2] [--quick] [--model DIR]

Both sides train the same Qwen2-VL model (``--model``; default: ``bench.vision_model.SMALL``, a
random Qwen2-VL with SmolLM2-135M's language sizes and a 4-block vision tower, built once into the
models folder: no Qwen2-VL checkpoint can be downloaded here) with its processor on
``mllm_demo.json`` (6 conversations, 8 pictures of about 300 x 170 px), LoRA r16 / alpha 32 /
dropout 0.05 on the language model's seven projections, batch 2, learning rate 1e-4 constant,
fp32, no activation checkpointing, seed 42, for ``--steps`` optimizer steps.

- ours: the studio's own path (``kinds.vision.prepare.prepare_vision_data`` reads and checks the rows,
  ``training.trainer.build_trainer`` builds the trainer with ``kinds.vision.collator``: answer-only
  labels, image tokens never scored);
- TRL: a bare script as TRL's docs write it for images: the ``images`` paths cast to a
  ``datasets.Image`` list, the ``<image>`` markers taken out (TRL places the images at the start of
  the first user turn), ``SFTConfig`` + ``SFTTrainer`` with the processor as ``processing_class``
  (TRL's ``DataCollatorForVisionLanguageModeling``: every token scored, image tokens included).

Runs alternate A B A B, each in a fresh process (``--quick``: both in this process); only ``trainer.train()`` is timed. The two losses
differ by design (ours scores answers only, TRL every token), so only speed is compared; each
side's tokens per step are printed so the work is seen to be the same. Prints one JSON line, then
a human summary.
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
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "mllm_demo.json"
SETTINGS = {
    "batch_size": 2,
    "max_seq_length": 1024,
    "learning_rate": 1e-4,
    "lr_scheduler_type": "constant",
    "lora_r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.05,
    "random_seed": 42,
}
TARGETS = r"^model\.language_model\.layers\.\d+\.(?:self_attn\.(?:q|k|v|o)_proj|mlp\.(?:gate|up|down)_proj)$"


def _log(sink: list[dict]) -> Any:
    from transformers import TrainerCallback

    class Callback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                sink.append({"step": state.global_step, "loss": logs["loss"], "tokens": state.num_input_tokens_seen})

    return Callback()


def _ours(model_dir: str, dataset: str, steps: int, out: Path, logs: list[dict]) -> Any:
    from trainer_core.kinds.vision.kind import VISION
    from trainer_core.models.loading import load_model
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.training.trainer import build_trainer

    request = TrainingStartRequest(model_name=model_dir, local_datasets=[dataset], max_steps=steps, **SETTINGS)
    processor = VISION.load_processor(Path(model_dir))
    model = load_model(Path(model_dir), request, "cpu")
    data = VISION.prepare_data(request, processor)
    return build_trainer(request, model, processor, data.train, None, out, "cpu", [_log(logs)])


def _trl(model_dir: str, dataset: str, steps: int, out: Path, logs: list[dict]) -> Any:
    import datasets
    from peft import LoraConfig
    from transformers import AutoModelForImageTextToText
    from trl import SFTConfig, SFTTrainer

    from trainer_core.kinds.vision.processor import load_processor

    folder = Path(dataset).parent
    rows = datasets.load_dataset("json", data_files=dataset, split="train")
    rows = rows.map(
        lambda r: {
            "messages": [{"role": m["role"], "content": m["content"].replace("<image>", "")} for m in r["messages"]],
            "images": [str(folder / image) for image in r["images"]],
        }
    )
    rows = rows.cast_column("images", datasets.List(datasets.Image()))
    args = SFTConfig(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=SETTINGS["batch_size"],
        learning_rate=SETTINGS["learning_rate"],
        lr_scheduler_type="constant",
        max_length=SETTINGS["max_seq_length"],
        seed=SETTINGS["random_seed"],
        data_seed=SETTINGS["random_seed"],
        logging_steps=1,
        bf16=False,
        use_cpu=True,
        gradient_checkpointing=False,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        include_num_input_tokens_seen="non_padding",
    )
    lora = LoraConfig(
        r=SETTINGS["lora_r"],
        lora_alpha=SETTINGS["lora_alpha"],
        lora_dropout=SETTINGS["lora_dropout"],
        target_modules=TARGETS,
        task_type="CAUSAL_LM",
    )
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype="float32", attn_implementation="sdpa")
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=rows,
        processing_class=load_processor(Path(model_dir)),  # AutoProcessor, or without torchvision its image part
        peft_config=lora,
        callbacks=[_log(logs)],
    )


def child(side: str, model_dir: str, dataset: str, steps: int) -> dict:
    """One run in this process; prints its JSON result line and returns it."""
    import torch

    torch.manual_seed(SETTINGS["random_seed"])
    logs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        maker = _ours if side == "ours" else _trl
        trainer = maker(model_dir, dataset, steps, Path(tmp), logs)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    found = {
        "side": side,
        "seconds": round(seconds, 2),
        "steps_per_second": round(steps / seconds, 4),
        "tokens_per_step": round(logs[-1]["tokens"] / len(logs), 1) if logs and logs[-1]["tokens"] else None,
        "last5_loss": round(statistics.mean(e["loss"] for e in logs[-5:]), 4),
    }
    print(json.dumps(found))
    return found


def default_model() -> str:
    """The ``SMALL`` random Qwen2-VL in the models folder (built on first use, about 20 s)."""
    from bench.vision_model import SMALL, build_qwen2_vl
    from trainer_core.models.loading import materialize_default_tokenizer
    from trainer_core.settings import get_settings

    models = get_settings().models_dir
    tokenizer = materialize_default_tokenizer(models)
    return str(build_qwen2_vl(tokenizer, Path(models) / "bench-Qwen2-VL-small", SMALL))


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the benchmark (``argv``: the command line's arguments); prints and returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=2, help="A B pairs to run")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--quick", action="store_true", help="2 steps, one A B pair (the test's smoke run)")
    parser.add_argument("--model", help="a Qwen2-VL-style model folder (default: bench.vision_model.SMALL)")
    parser.add_argument("--child", choices=["ours", "trl"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.pairs = 2, 1
    model_dir = args.model or default_model()
    if args.child:
        child(args.child, model_dir, args.dataset, args.steps)
        return {}
    results = []
    for _ in range(args.pairs):
        for side in ("ours", "trl"):
            if args.quick:  # a check of the script, not of the figures: both sides in this process
                results.append(child(side, model_dir, args.dataset, args.steps))
            else:
                command = [sys.executable, "-m", "bench.vision", "--child", side, "--steps", str(args.steps)]
                command += ["--dataset", args.dataset, "--model", model_dir]
                out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            found = results[-1]
            print(
                f"{side:5s} {found['seconds']:7.1f} s  {found['steps_per_second']:.3f} steps/s  "
                f"{found['tokens_per_step']} tokens/step  last5 loss {found['last5_loss']:.4f}",
                file=sys.stderr,
                flush=True,
            )
    rate = {
        side: statistics.median(r["steps_per_second"] for r in results if r["side"] == side) for side in ("ours", "trl")
    }
    report = {
        "bench": "vision",
        "model": model_dir,
        "steps": args.steps,
        "settings": SETTINGS,
        "runs": results,
        "median_steps_per_second": rate,
        "speed_ratio": rate["ours"] / rate["trl"],
    }
    print(json.dumps(report))
    print(f"ours / TRL steps per second: {report['speed_ratio']:.3f}x (target: within 10 %, i.e. >= 0.90)")
    return report


if __name__ == "__main__":
    main()
