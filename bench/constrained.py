"""Constrained decoding against free decoding (issue 50): tokens/s of the chat path's ``generate``
(greedy, CPU) on the default model, free and forced to a tool call (``tools.constrain``:
``<tool_call>\\n`` + a JSON call of a weather function with required fields, an enum and a nested
object + ``\\n</tool_call>``), A B A B; plus the cost of compiling the constraint (the first one
wraps the tokenizer for llguidance) and, for each grammar library installed, its own time a token
without the model (``bench.constrain_libraries``).

    python -m bench.constrained [--pairs 4] [--model DIR] [--threads N] [--quick] [--json FILE]

The free side gets ``max_new_tokens`` equal to the constrained answer's length (greedy: the same
each time), so both sides decode about as many tokens; pairs run A B, B A, A B, ... so that the
machine's drift falls on both sides. The cost is 1 - the median over pairs of constrained / free tokens/s
(pairs cancel the machine's drift), and the same of CPU time a token (this process's, so other
work on a shared machine moves it less). Target: constrained costs <= 15 % of free tokens/s. ``--quick``: one
pair, 24 tokens at most (a smoke test). Prints one JSON line, then a human summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Optional

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        },
    },
    "required": ["city", "unit", "days", "where"],
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
MESSAGES = [{"role": "user", "content": "What will the weather be in Paris for the next 3 days? Use get_weather."}]
PREFIX, SUFFIX = "<tool_call>\n", "\n</tool_call>"


def loaded_model(path: str) -> Any:
    """The model at ``path`` as the chat engine holds it (``serving.loader.LoadedModel``, CPU)."""
    from transformers import AutoModelForCausalLM

    from trainer_core.models.loading import load_tokenizer
    from trainer_core.serving.loader import LoadedModel
    from trainer_core.serving.schemas import ModelChoice

    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()
    choice = ModelChoice(id="bench", label="bench", kind="base", base_model=path, path=None, adapter=False)
    context = model.config.max_position_embeddings
    return LoadedModel(choice, model, load_tokenizer(path), "cpu", Path(path), context, 0.0)


def compile_seconds(loaded: Any) -> dict[str, float]:
    """ms to compile the tool-call constraint the first time (tokenizer wrap + grammar) and a new
    schema once the tokenizer is wrapped."""
    from trainer_core.serving.generate import stop_token_ids
    from trainer_core.tools.constrain import call_constraint

    stops = stop_token_ids(loaded.tokenizer, loaded.model)
    began = time.perf_counter()
    call_constraint(TOOLS, "get_weather", PREFIX, SUFFIX).processor(loaded.tokenizer, stops)
    first = time.perf_counter() - began
    other = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}, *TOOLS]
    began = time.perf_counter()
    call_constraint(other, None, PREFIX, SUFFIX).processor(loaded.tokenizer, stops)
    return {
        "first_compile_ms": round(1000 * first, 1),
        "new_schema_compile_ms": round(1000 * (time.perf_counter() - began), 2),
    }


def one_side(loaded: Any, constrained: bool, max_new_tokens: int) -> dict[str, Any]:
    """One greedy answer through ``serving.generate.generate``: tokens, seconds, tokens/s, text."""
    from trainer_core.serving.generate import generate
    from trainer_core.serving.schemas import GenerationSettings
    from trainer_core.tools.constrain import call_constraint

    constraint = call_constraint(TOOLS, "get_weather", PREFIX, SUFFIX) if constrained else None
    settings = GenerationSettings(temperature=0, max_new_tokens=max_new_tokens)
    began, cpu = time.perf_counter(), time.process_time()
    finish = generate(loaded, MESSAGES, settings, on_text=lambda text: None, constraint=constraint)
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    return {
        "side": "constrained" if constrained else "free",
        "tokens": finish.completion_tokens,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(finish.completion_tokens / seconds, 2),
        "cpu_ms_per_token": round(1000 * cpu / finish.completion_tokens, 2),
        "finish": finish.reason,
        "text": finish.text,
    }


def libraries(loaded: Any) -> dict[str, Any]:
    """``bench.constrain_libraries.measure`` on the tool call and a compact answer of it."""
    from bench.constrain_libraries import measure
    from trainer_core.serving.generate import stop_token_ids
    from trainer_core.tools.constrain import call_schema

    call = {
        "name": "get_weather",
        "arguments": {"city": "Paris", "unit": "celsius", "days": 3, "where": {"lat": 48.9, "lon": 2.4}},
    }
    stops = stop_token_ids(loaded.tokenizer, loaded.model)
    answer = PREFIX + json.dumps(call) + SUFFIX
    return measure(loaded.tokenizer, call_schema(TOOLS, "get_weather"), PREFIX, SUFFIX, stops, answer)


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    """Run the comparison; returns the report (also printed as one JSON line)."""
    from bench.scaling import default_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=4, help="pairs of free and constrained, order alternating")
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--quick", action="store_true", help="one pair of 24 tokens at most (a smoke test)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = loaded_model(args.model)
    compiles = compile_seconds(loaded)
    limit = 24 if args.quick else 160
    length = one_side(loaded, True, limit)["tokens"]  # warm-up; greedy: every constrained answer is this long
    pairs = []
    for i in range(1 if args.quick else args.pairs):
        order = (False, True) if i % 2 == 0 else (True, False)  # A B, then B A: drift falls on both
        pair = {forced: one_side(loaded, forced, limit if forced else length) for forced in order}
        pairs.append((pair[False], pair[True]))
    runs = [run for pair in pairs for run in pair]  # free, constrained, free, ...
    free = statistics.median(r["tokens_per_s"] for r in runs if r["side"] == "free")
    forced = statistics.median(r["tokens_per_s"] for r in runs if r["side"] == "constrained")
    ratios = [b["tokens_per_s"] / a["tokens_per_s"] for a, b in pairs]  # constrained / free, per pair
    cpu = [a["cpu_ms_per_token"] / b["cpu_ms_per_token"] for a, b in pairs]
    report = {
        "bench": "constrained",
        "library": "llguidance",
        "threads": torch.get_num_threads(),
        **compiles,
        "libraries": libraries(loaded),
        "free_tokens_per_s": free,
        "constrained_tokens_per_s": forced,
        "pair_ratios": [round(r, 3) for r in ratios],
        "cost_percent": round(100 * (1 - statistics.median(ratios)), 1),  # of tokens/s, median pair
        "cpu_cost_percent": round(100 * (1 - statistics.median(cpu)), 1),  # of CPU time a token
        "runs": runs,
    }
    line = json.dumps(report)
    print(line)
    if args.json:
        args.json.write_text(line + "\n", encoding="utf-8")
    print(
        f"free {free} vs constrained {forced} tokens/s (medians); cost {report['cost_percent']} % of tokens/s "
        f"(median of pairs {report['pair_ratios']}; target <= 15 %), {report['cpu_cost_percent']} % of CPU time; "
        f"compile {compiles['first_compile_ms']} ms first, {compiles['new_schema_compile_ms']} ms a new schema; "
        f"libraries (tokenizer s, compile ms, ms a token): {report['libraries']}"
    )
    return report


if __name__ == "__main__":
    main()
