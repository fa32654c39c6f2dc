"""Chat speed with torch's threads as they were (all cores) against the threads chosen for the load
(``serving.threads.cpu_threads``), A B interleaved, with and without a training-like load beside it:
``--beside N`` processes each multiplying 512-square matrices in a loop with torch's default
threads, as a training step keeps the cores busy.

    python -m bench.chat_threads [--rounds 4] [--tokens 32] [--beside 1] [--model DIR] [--quick]

``--quick``: one round of 2 tokens (the script checked, not the figures).

Greedy ``model.generate`` of the default model (SmolLM2-135M-Instruct) in this process, same prompt
and settings each time. Prints one JSON line (with the load average seen), then a summary.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from typing import Any

PROMPT = "Write a long story about a lighthouse keeper."


def _busy(stop: Any) -> None:
    import torch

    a = torch.randn(512, 512)
    while not stop.is_set():
        a = torch.tanh(a @ a)


def _tokens_per_second(model: Any, inputs: Any, tokens: int, chosen: bool) -> tuple[float, int]:
    import torch

    from trainer_core.serving.threads import cpu_threads

    began = time.perf_counter()
    with torch.inference_mode():
        if chosen:
            with cpu_threads("cpu") as threads:
                out = model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
        else:
            threads = torch.get_num_threads()
            out = model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    new = out.shape[1] - inputs["input_ids"].shape[1]
    return new / (time.perf_counter() - began), threads


def _rounds(model: Any, inputs: Any, tokens: int, rounds: int) -> dict[str, Any]:
    speeds: dict[str, list[float]] = {"all_cores": [], "chosen": []}
    threads: list[int] = []
    for _ in range(rounds):  # A B interleaved: a change of load hits both
        speeds["all_cores"].append(_tokens_per_second(model, inputs, tokens, False)[0])
        speed, used = _tokens_per_second(model, inputs, tokens, True)
        speeds["chosen"].append(speed)
        threads.append(used)
        print(f"round: all cores {speeds['all_cores'][-1]:.2f}, chosen ({used}) {speed:.2f} tokens/s", flush=True)
    return {
        "tokens_per_second": {k: [round(v, 2) for v in values] for k, values in speeds.items()},
        "median": {k: round(statistics.median(values), 2) for k, values in speeds.items()},
        "chosen_threads": threads,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--beside", type=int, default=1, help="training-like busy processes beside the chat")
    parser.add_argument("--model", default=None, help="a model folder (default: the default model)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.tokens = 1, 2

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer_core.models.loading import materialize_default_model
    from trainer_core.settings import get_settings

    folder = args.model or materialize_default_model(get_settings().models_dir)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True
    )
    inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    _tokens_per_second(model, inputs, 4, False)  # warm-up
    report: dict[str, Any] = {
        "bench": "chat_threads",
        "cores": torch.get_num_threads(),
        "tokens": args.tokens,
        "rounds": args.rounds,
    }
    report["alone"] = _rounds(model, inputs, args.tokens, args.rounds)
    stop = multiprocessing.get_context("spawn").Event()
    busy = [multiprocessing.get_context("spawn").Process(target=_busy, args=(stop,)) for _ in range(args.beside)]
    for process in busy:
        process.start()
    try:
        time.sleep(3.0)  # the busy processes running
        report["beside_training_load"] = _rounds(model, inputs, args.tokens, args.rounds)
    finally:
        stop.set()
        for process in busy:
            process.join(10)
    print(json.dumps(report))
    for name in ("alone", "beside_training_load"):
        r = report[name]
        print(
            f"{name}: all cores {r['median']['all_cores']} tokens/s, chosen threads {r['chosen_threads']} "
            f"{r['median']['chosen']} tokens/s (load {r['load_average_1min']})"
        )
    return report


if __name__ == "__main__":
    main()
