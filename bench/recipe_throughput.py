"""Recipe throughput (issue 52): rows a minute made by a recipe run against the same prompts sent by
a bare ``openai`` client loop, at concurrency 1 and 4. Target: the recipe >= 0.9x the bare loop.

The writer is SmolLM2-135M-Instruct as a Q4_K_M GGUF (made offline once from the bundled model:
``tests.support.smollm2_gguf``) served by llama.cpp through the studio's own ``/v1`` (the GGUF as a
run's export: ``serving.gguf_worker``; the studio answers one request at a time and queues the
rest). The recipe: one record a topic, one ``llm-text`` column, greedy, ``--max-tokens`` a row.
The bare loop sends each record's rendered messages with the same parameters, ``--concurrency``
requests in flight (a thread pool), as the recipe does. A B A B pairs, at each concurrency; the
model is loaded before timing.

    python -m bench.recipe_throughput [--records 6] [--pairs 2] [--max-tokens 32] [--concurrency 1 4]

Prints one JSON line, then a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

TARGET_RATIO = 0.9
TOPICS = ["bread", "rivers", "chess", "volcanoes", "bicycles", "tea", "owls", "glass", "maps", "bridges", "bees", "ink"]


def recipe_data(records: int, max_tokens: int, concurrency: int, url: str, model: str) -> dict[str, Any]:
    """The recipe: ``records`` topics, one text column."""
    return {
        "name": "throughput",
        "topics": (TOPICS * (1 + records // len(TOPICS)))[:records],
        "model": {
            "endpoint": url,
            "model": model,
            "timeout_s": 600,
            "inference_parameters": {
                "temperature": 0,
                "max_tokens": max_tokens,
                "max_parallel_requests": concurrency,
            },
        },
        "columns": [{"name": "fact", "column_type": "llm-text", "prompt": "Write one fact about {{ topic }}."}],
        "output": {"format": "alpaca", "fields": {"instruction": "topic", "output": "fact"}},
    }


def bare_rows_per_minute(recipe: Any, token: str) -> tuple[float, int]:
    """(rows a minute, completion tokens) of the recipe's prompts sent by a bare openai loop."""
    import openai

    from trainer_core.recipes.columns import template

    params = recipe.model.inference_parameters
    column = recipe.columns[0]
    prompts = [template(column.prompt).render(topic=t) for t in recipe.topics]
    client = openai.OpenAI(base_url=recipe.model.endpoint, api_key=token, max_retries=3, timeout=600)

    def one(prompt: str) -> int:
        reply = client.chat.completions.create(
            model=recipe.model.model,
            messages=[{"role": "user", "content": prompt}],
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
        )
        return reply.usage.completion_tokens if reply.usage else 0

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=params.max_parallel_requests) as pool:
        tokens = sum(pool.map(one, prompts))
    return 60 * len(prompts) / (time.monotonic() - began), tokens


def recipe_rows_per_minute(recipe: Any, settings: Any, token: str) -> tuple[float, int]:
    """(rows a minute, completion tokens) of the recipe run (rows made, kept or not)."""
    from pydantic import SecretStr

    from trainer_core.recipes.run import run_recipe

    result = run_recipe(recipe, settings, SecretStr(token))
    return 60 * result.counts["made"] / result.seconds, result.completion_tokens


def measure(records: int, pairs: int, max_tokens: int, levels: list[int]) -> dict[str, Any]:
    """A B A B pairs (recipe, bare loop) of rows a minute at each concurrency in ``levels``."""
    import openai

    from tests.e2e.conftest import TOKEN
    from tests.support.recipe_server import studio_v1
    from tests.support.smollm2_gguf import smollm2_q4_k_m
    from trainer_core.recipes.schema import parse_recipe
    from trainer_core.serving.worker import quiet_libraries
    from trainer_core.settings import Settings

    quiet_libraries()
    gguf = smollm2_q4_k_m()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", api_token=TOKEN)
        with studio_v1(settings, gguf=gguf) as (url, model):
            warm = openai.OpenAI(base_url=url, api_key=TOKEN)  # load the model before timing
            warm.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=1)
            for level in levels:
                recipe = parse_recipe(recipe_data(records, max_tokens, level, url, model))
                rows = []
                for _ in range(pairs):
                    a, a_tokens = recipe_rows_per_minute(recipe, settings, TOKEN)
                    b, b_tokens = bare_rows_per_minute(recipe, TOKEN)
                    rows.append({"recipe": round(a, 1), "bare": round(b, 1), "tokens": [a_tokens, b_tokens]})
                ratio = statistics.median(r["recipe"] / r["bare"] for r in rows)
                figures[f"concurrency_{level}"] = {"pairs": rows, "ratio": round(ratio, 3)}
    return {
        "bench": "recipe_throughput",
        "model": gguf.name,
        "records": records,
        "max_tokens": max_tokens,
        "load": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
        **figures,
        "target": TARGET_RATIO,
        "passed": all(f["ratio"] >= TARGET_RATIO for f in figures.values()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the bench, print the figures; returns them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=6)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args(argv)
    report = measure(args.records, args.pairs, args.max_tokens, args.concurrency)
    print(json.dumps(report))
    for level in args.concurrency:
        figures = report[f"concurrency_{level}"]
        recipe = statistics.median(r["recipe"] for r in figures["pairs"])
        bare = statistics.median(r["bare"] for r in figures["pairs"])
        print(
            f"concurrency {level}: recipe {recipe:.1f} rows/min, bare openai loop {bare:.1f} rows/min, "
            f"ratio {figures['ratio']:.2f} (target >= {TARGET_RATIO})"
        )
    print(f"load {report['load']} on {report['cores']} cores")
    return report


if __name__ == "__main__":
    main()
