"""Embedding runs: retrieval quality base vs tuned, and speed against a bare sentence-transformers script.

    python -m bench.embedding quality [--steps 60] [--max-seq-length 128] [--model DIR] [--quick]
    python -m bench.embedding speed [--steps 8] [--pairs 2] [--model DIR|tiny] [--quick]

Data: ``alpaca_en_demo.json`` as (anchor, positive) pairs, instruction -> output (the ``input`` column
left out).

- quality: the default model (SmolLM2-135M-Instruct, or ``--model``'s causal LM) as a last-token
  embedder (``is_embedding``), trained through the studio's own worker (``training.worker.train``)
  with every setting at its default (LoRA r16 / alpha 32 on all linear layers, learning rate 1e-3
  cosine, batch 4, MultipleNegativesRankingLoss with the no-duplicates sampler) except ``--steps``
  and ``--max-seq-length`` (the defaults' 3 epochs take hours on 2 CPU cores) and ``val_size`` 0.1
  (10 % of the pairs held out, seeded). The held-out pairs are scored before and after with the same
  ``InformationRetrievalEvaluator`` (``kinds.embedding.evaluators``; each held-out instruction
  retrieves its own output among all held-out outputs): recall@1, nDCG@10, MRR@10, recall@10.
- speed: A B A B, each run in a fresh process (``--quick``: both in this one), only ``trainer.train()`` timed (and each step: the
  median step time after the first, and with ``--threads 1`` its CPU time, are the figures least
  moved by other work on the machine); ours builds the
  trainer as the worker does (``load_embedding_model``, ``prepare_embedding_data``, the kind's
  ``build_trainer``), the bare side as sentence-transformers' docs write it (``SentenceTransformer``,
  ``MultipleNegativesRankingLoss``, ``SentenceTransformerTrainingArguments`` with the no-duplicates
  sampler, PEFT's ``get_peft_model`` on ``model[0].model``). Same model, LoRA, batch 4, max 128
  tokens, learning rate 1e-3 cosine, fp32, seed 42. Reported per run: samples (pairs) / s of the whole
  ``train()`` and at steady state (after the first step), and the mean of the logged losses (target:
  within 0.02). ``--model tiny``: the random BERT-style encoder of
  ``bench.embedding_model``.

Prints one JSON line, then a human summary.
"""

from __future__ import annotations

import argparse
import json
import queue
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

from bench.ab import LossLog, spawn, summary, timed_train

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"
PAIRS = {"anchor": "instruction", "positive": "output"}
SPEED = {"batch_size": 4, "max_seq_length": 128, "learning_rate": 1e-3, "lr_scheduler_type": "cosine", "seed": 42}
REPORTED = {"recall@1": "accuracy@1", "ndcg@10": "ndcg@10", "mrr@10": "mrr@10", "recall@10": "recall@10"}


def default_model() -> str:
    """The bundled SmolLM2-135M-Instruct folder (made from the GGUF on first use)."""
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.settings import get_settings

    return str(materialize_default_model(get_settings().models_dir))


def _tiny_encoder() -> str:
    from bench.embedding_model import build_tiny_encoder

    folder = Path(tempfile.gettempdir()) / "studio-bench-tiny-encoder"
    if not (folder / "modules.json").is_file():
        build_tiny_encoder(folder)
    return str(folder)


def _scores(evaluator: Any, model: Any) -> dict[str, float]:
    """``evaluator``'s figures for ``model`` under ``REPORTED``'s names (cosine similarity)."""
    found = evaluator(model)
    return {name: round(found[f"cosine_{key}"], 4) for name, key in REPORTED.items()}


def quality(model_dir: str, steps: int, max_seq_length: int) -> dict[str, Any]:
    """Base vs tuned retrieval on the held-out 10 % (figures in 0..1) and the run's facts."""
    from trainer_core.kinds.embedding.data import prepare_embedding_data
    from trainer_core.kinds.embedding.evaluators import build_evaluator
    from trainer_core.kinds.embedding.loading import load_embedder
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.training.worker import train

    request = TrainingStartRequest(
        model_name=model_dir,
        local_datasets=[str(DATASET)],
        is_embedding=True,
        embedding_columns=PAIRS,
        val_size=0.1,
        max_steps=steps,
        eval_steps=steps,
        max_seq_length=max_seq_length,
    )
    base = load_embedder(Path(model_dir))
    base.max_seq_length = max_seq_length
    data = prepare_embedding_data(request, base.tokenizer)
    evaluator = build_evaluator(data.eval, data.format, request.query_prompt, 16)
    began = time.perf_counter()
    before = _scores(evaluator, base)
    eval_seconds = time.perf_counter() - began
    del base
    with tempfile.TemporaryDirectory() as scratch:
        out, events = Path(scratch) / "run", queue.Queue()
        began = time.perf_counter()
        ended = train(request, "bench-embedding", out, events, threading.Event())
        train_seconds = time.perf_counter() - began
        assert ended[0] == "completed", ended
        logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        losses = [row["loss"] for row in logged if row.get("loss") is not None]
        tuned = load_embedder(out)
        tuned.max_seq_length = max_seq_length
        after = _scores(evaluator, tuned)
    return {
        "model": model_dir,
        "steps": steps,
        "max_seq_length": max_seq_length,
        "train_pairs": len(data.train),
        "held_out_pairs": len(data.eval),
        "base": before,
        "tuned": after,
        "gain": {k: round(after[k] - before[k], 4) for k in before},
        "first_losses": [round(x, 3) for x in losses[:3]],
        "last_losses": [round(x, 3) for x in losses[-3:]],
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
    }


def _ours(model_dir: str, steps: int, out: Path, losses: list[float], ends: list[float]) -> Any:
    from trainer_core.kinds.embedding.data import prepare_embedding_data
    from trainer_core.kinds.embedding.kind import EMBEDDING
    from trainer_core.kinds.embedding.trainer import load_embedding_model
    from trainer_core.schemas import TrainingStartRequest

    request = TrainingStartRequest(
        model_name=model_dir,
        local_datasets=[str(DATASET)],
        is_embedding=True,
        embedding_columns=PAIRS,
        max_steps=steps,
        mixed_precision="no",
        batch_size=SPEED["batch_size"],
        max_seq_length=SPEED["max_seq_length"],
        learning_rate=SPEED["learning_rate"],
        lr_scheduler_type=SPEED["lr_scheduler_type"],
        random_seed=SPEED["seed"],
        save_steps=0,
    )
    model = load_embedding_model(Path(model_dir), request, "cpu")
    data = prepare_embedding_data(request, model.tokenizer)
    return EMBEDDING.build_trainer(request, model, data, out, "cpu", [LossLog.make(losses, ends)])


def _bare(model_dir: str, steps: int, out: Path, losses: list[float], ends: list[float]) -> Any:
    """As sentence-transformers' training docs write it (with PEFT on the transformer)."""
    import datasets
    from peft import LoraConfig, get_peft_model
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.trainer import SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.training_args import (
        BatchSamplers,
        SentenceTransformerTrainingArguments,
    )

    from trainer_core.kinds.embedding.loading import load_embedder

    if (Path(model_dir) / "modules.json").is_file():
        model = SentenceTransformer(model_dir, device="cpu")
    else:  # a causal LM: last-token pooling with left padding, as a user would set it up
        model = load_embedder(Path(model_dir), "cpu")
    model.max_seq_length = SPEED["max_seq_length"]
    config = LoraConfig(
        task_type="FEATURE_EXTRACTION", r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear"
    )
    model[0].model = get_peft_model(model[0].model, config)
    rows = datasets.load_dataset("json", data_files=str(DATASET), split="train")
    rows = rows.select_columns(["instruction", "output"]).rename_columns(
        {"instruction": "anchor", "output": "positive"}
    )
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=SPEED["batch_size"],
        learning_rate=SPEED["learning_rate"],
        lr_scheduler_type=SPEED["lr_scheduler_type"],
        seed=SPEED["seed"],
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
    )
    loss = MultipleNegativesRankingLoss(model)
    return SentenceTransformerTrainer(
        model=model, args=args, train_dataset=rows, loss=loss, callbacks=[LossLog.make(losses, ends)]
    )


def side(which: str, model_dir: str, steps: int) -> dict[str, Any]:
    """One timed run of ``which`` ("ours" | "bare"): ``ab.timed_train``'s figures (samples are pairs)."""
    losses: list[float] = []
    ends: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        trainer = (_ours if which == "ours" else _bare)(model_dir, steps, Path(scratch) / "run", losses, ends)
        return {"side": which, **timed_train(trainer, steps, SPEED["batch_size"], losses, ends)}


def speed(model_dir: str, steps: int, pairs: int, threads: Optional[int] = None, here: bool = False) -> dict[str, Any]:
    """``pairs`` A B rounds (each side in a fresh process with ``threads`` torch threads, None: torch's
    default; ``here``: in this process, a check of the script); per side the median samples / s, the
    median step time (wall and CPU) and the mean logged loss."""
    argv = ["--model", model_dir, "--steps", str(steps)]
    sides = [which for _ in range(pairs) for which in ("ours", "bare")]
    runs = [
        side(which, model_dir, steps) if here else spawn("bench.embedding", ["_side", which, *argv], threads)
        for which in sides
    ]
    return {"model": model_dir, "steps": steps, "pairs": pairs, **summary(runs)}


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the chosen part; print and return its report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=["quality", "speed", "_side"])
    parser.add_argument("which", nargs="?", choices=["ours", "bare"], help="_side only")
    parser.add_argument("--model", help="a model folder; 'tiny': the random BERT-style encoder")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--threads", type=int, help="torch threads per side (1: CPU time least moved by other work)")
    parser.add_argument("--quick", action="store_true", help="the tiny encoder, 2 steps, one A B pair (a smoke run)")
    args = parser.parse_args(argv)
    model = _tiny_encoder() if args.model == "tiny" or (args.quick and not args.model) else args.model
    if args.part == "_side":
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        report = side(args.which, model, args.steps)
        print(json.dumps(report))
        return report
    model = model or default_model()
    if args.part == "quality":
        report = quality(model, args.steps or (2 if args.quick else 60), args.max_seq_length)
        print(json.dumps(report))
        print(f"held-out retrieval, {report['held_out_pairs']} pairs: base {report['base']} -> tuned {report['tuned']}")
    else:
        steps, pairs = args.steps or (2 if args.quick else 8), 1 if args.quick else args.pairs
        report = speed(model, steps, pairs, args.threads, here=args.quick)  # --quick: both sides in this process
        print(json.dumps(report))
        print(
            f"ours {report['ours']['median_samples_per_s']} vs bare {report['bare']['median_samples_per_s']} samples/s"
            f" (x{report['ratio']}); median step {report['ours']['median_step_ms']} vs {report['bare']['median_step_ms']} ms"
            f" (x{report['step_ratio']}); CPU per step x{report['step_cpu_ratio']}; loss gap {report['loss_gap']}"
        )
    return report


if __name__ == "__main__":
    main()
