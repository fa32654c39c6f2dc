"""Chat speed and memory: tokens/s through the chat path (``ChatEngine.stream``: inference worker,
event queue, incremental decoding) vs a plain ``model.generate`` on the same model and settings
(greedy, same max_new_tokens) in this process; time to first token once loaded; the cold load time
of a run (process start, imports, base + adapter); and the inference worker's RSS for base-vs-tuned
of a LoRA run vs the base model alone (one set of base weights: the base's answers come from the
same weights with the adapter disabled); and the run's tokens/s against its base model's through
the same engine (the adapter merged in for tuned answers: target >= 90 %, issue 27).

    python -m bench.chat [--quick] [--data-dir DIR]

Without ``--data-dir`` (a studio data dir holding a finished LoRA run) it trains a 3-step LoRA run
of the default model into a temporary folder first (~20 s). Targets (issue 9): chat path within
10 % of plain generate in tokens/s; time to first token <= 0.5 s. Prints one JSON line, then a
human summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import psutil

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "identity.json"
PROMPT = "Who are you?"
LONG_PROMPT = "Write a long story about a dragon who learns to paint."
MIB = 2**20


def _train(data_dir: Path) -> None:
    """A 3-step LoRA run of the default model (as the tests' ``trained_run``) into ``data_dir``."""
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import Settings, get_settings

    settings = Settings(data_dir=data_dir)
    model = materialize_default_model(get_settings().models_dir)
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path), warm_modules=())
    runner.start(
        TrainingStartRequest(
            model_name=str(model),
            local_datasets=[str(DATASET)],
            max_steps=3,
            batch_size=2,
            max_seq_length=128,
            dataset_slice_end=16,
            learning_rate=1e-3,
        )
    )
    runner.wait(900)
    runner.store.close()


def _plain_model(choice: Any) -> tuple[Any, Any]:
    """The same weights loaded in this process with plain transformers + PEFT: (model, tokenizer)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer_core.models.loading import resolve_model_path
    from trainer_core.settings import get_settings

    base = resolve_model_path(choice.base_model, None, get_settings().models_dir)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="sdpa")
    return PeftModel.from_pretrained(model, choice.path).eval(), AutoTokenizer.from_pretrained(choice.path)


def plain_tokens_per_s(model: Any, tokenizer: Any, max_new_tokens: int) -> tuple[float, int]:
    """(tokens/s, new tokens) of one greedy ``model.generate`` for LONG_PROMPT."""
    import torch

    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": LONG_PROMPT}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    began = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False)
    new = out.shape[1] - ids.shape[1]
    return new / (time.perf_counter() - began), new


def chat_tokens_per_s(engine: Any, model_id: str, settings: Any, use_adapter: bool = True) -> tuple[float, int, float]:
    """(tokens/s, completion tokens, seconds to the first text) of one ``engine.stream`` of LONG_PROMPT
    (``use_adapter=False``: the run's base model answers)."""
    from trainer_core.serving.schemas import ChatMessage

    began = time.perf_counter()
    first: Optional[float] = None
    for event in engine.stream(model_id, [ChatMessage(role="user", content=LONG_PROMPT)], settings, use_adapter):
        if first is None and event.delta:
            first = time.perf_counter() - began
    return event.completion_tokens / (time.perf_counter() - began), event.completion_tokens, first or 0.0


def time_to_first_token(engine: Any, model_id: str, settings: Any) -> float:
    """Seconds from ``engine.stream`` to the first piece of text for PROMPT (model loaded)."""
    from trainer_core.serving.schemas import ChatMessage

    began = time.perf_counter()
    stream = engine.stream(model_id, [ChatMessage(role="user", content=PROMPT)], settings)
    for event in stream:
        if event.delta:
            seconds = time.perf_counter() - began
            stream.close()
            return seconds
    return time.perf_counter() - began


def worker_rss_mib(engine: Any) -> float:
    """Resident memory of the engine's inference worker, MiB."""
    return psutil.Process(engine._worker.pid).memory_info().rss / MIB


def measure(data_dir: Path, quick: bool) -> dict:
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.serving.schemas import ChatMessage, GenerationSettings
    from trainer_core.serving.worker import quiet_libraries
    from trainer_core.settings import Settings

    quiet_libraries()
    settings = Settings(data_dir=data_dir)
    engine = ChatEngine(JobRunner(store=RunStore(settings.db_path), runs_dir=settings.runs_dir), settings)
    run = next(c for c in engine.choices() if c.kind == "final" and c.adapter)
    max_new = 32 if quick else 128
    greedy = GenerationSettings(temperature=0, max_new_tokens=max_new)
    report: dict[str, Any] = {"bench": "chat", "run": run.id, "max_new_tokens": max_new}
    try:
        report["cold_load_s"] = round(engine.load(run.id), 2)
        report["ttft_s"] = [round(time_to_first_token(engine, run.id, greedy), 3) for _ in range(3 if quick else 5)]
        model, tokenizer = _plain_model(run)
        chat, plain = [], []
        for _ in range(1 if quick else 5):  # A B A B: machine noise hits both sides alike
            chat.append(chat_tokens_per_s(engine, run.id, greedy))
            plain.append(plain_tokens_per_s(model, tokenizer, max_new))
        report["weights_mib"] = round(sum(p.numel() * p.element_size() for p in model.parameters()) / MIB)
        del model
        report["chat_tokens_per_s"] = [round(c[0], 2) for c in chat]
        report["plain_tokens_per_s"] = [round(p[0], 2) for p in plain]
        report["tokens"] = {"chat": chat[0][1], "plain": plain[0][1]}
        report["pair_ratios"] = [round(c[0] / p[0], 3) for c, p in zip(chat, plain)]  # each A B pair: same noise
        report["chat_vs_plain"] = round(statistics.median(report["pair_ratios"]), 3)
        report["chat_vs_plain_best"] = round(max(report["chat_tokens_per_s"]) / max(report["plain_tokens_per_s"]), 3)
        tuned, base = [], []
        for _ in range(1 if quick else 3):  # A B A B: the run (adapter merged in) vs its base, same weights
            tuned.append(chat_tokens_per_s(engine, run.id, greedy)[0])
            base.append(chat_tokens_per_s(engine, run.id, greedy, use_adapter=False)[0])
        report["tuned_tokens_per_s"] = [round(t, 2) for t in tuned]
        report["base_tokens_per_s"] = [round(b, 2) for b in base]
        report["tuned_vs_base"] = round(statistics.median(t / b for t, b in zip(tuned, base)), 3)
        report["rss_base_vs_tuned_mib"] = round(worker_rss_mib(engine))
        report["base_load_s"] = round(engine.load("base"), 2)
        engine.complete("base", [ChatMessage(role="user", content=PROMPT)], greedy)
        report["rss_base_alone_mib"] = round(worker_rss_mib(engine))
    finally:
        engine.unload()
    return report


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="32 new tokens, one round (not 5), 3 first-token timings")
    parser.add_argument("--data-dir", type=Path, help="a studio data dir holding a finished LoRA run")
    args = parser.parse_args(argv)
    if args.data_dir is not None:
        report = measure(args.data_dir, args.quick)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            _train(Path(tmp))
            report = measure(Path(tmp), args.quick)
    print(json.dumps(report))
    print(
        f"chat path {statistics.median(report['chat_tokens_per_s']):.1f} tokens/s vs plain generate "
        f"{statistics.median(report['plain_tokens_per_s']):.1f} tokens/s (median of the pairs {report['chat_vs_plain']:.2f}x "
        f"of {report['pair_ratios']}, best rounds {report['chat_vs_plain_best']:.2f}x; "
        f"{report['tokens']['chat']} vs {report['tokens']['plain']} tokens, greedy, max_new_tokens {report['max_new_tokens']})"
    )
    print(
        f"time to first token (loaded): median {statistics.median(report['ttft_s']):.3f} s of {report['ttft_s']}; "
        f"cold load of the run {report['cold_load_s']} s (base alone {report['base_load_s']} s); "
        f"tuned {report['tuned_tokens_per_s']} vs its base {report['base_tokens_per_s']} tokens/s: "
        f"{report['tuned_vs_base']:.0%} (target >= 90 %)"
    )
    print(
        f"inference worker RSS: base vs tuned of a LoRA run {report['rss_base_vs_tuned_mib']} MiB, base alone "
        f"{report['rss_base_alone_mib']} MiB (a second copy of the weights would add {report['weights_mib']} MiB)"
    )
    return report


if __name__ == "__main__":
    main()
