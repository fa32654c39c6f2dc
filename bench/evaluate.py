"""Evaluation speed: generated tokens/s of the evaluation's batched generation
(``evaluation.generation.generate_answers``: prompts sorted by length, left padding, stop at the
template's end token) vs a plain batched ``model.generate`` over the same rows in file order
(the tokenizer's left padding, same batch size, greedy, same stop tokens and max_new_tokens), on
the same loaded LoRA model in this process, alternating A B A B so machine noise hits both alike;
then the wall time of a whole default evaluation (loss + answers of the tuned and the base model,
scores, predictions.jsonl) over ``--eval-rows`` rows.

    python -m bench.evaluate [--quick] [--data-dir DIR] [--rows N] [--eval-rows N]

Without ``--data-dir`` (a studio data dir holding a finished LoRA run) it trains a 3-step LoRA run
of the default model into a temporary folder first (~20 s). Target (issue 10): evaluation
generates at >= 80 % of the tokens/s of plain batched generate; (issue 27) the tuned model
generates at >= 90 % of its base's tokens/s (``tuned_vs_base``). Prints one JSON line, then a
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

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"


def _choice(data_dir: Path) -> Any:
    """The newest finished LoRA run's final weights in ``data_dir``."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.choices import list_choices
    from trainer_core.settings import Settings

    settings = Settings(data_dir=data_dir)
    store = RunStore(settings.db_path)
    try:
        return next(
            c
            for c in list_choices(JobRunner(store=store, runs_dir=settings.runs_dir).store, settings)
            if c.kind == "final" and c.adapter
        )
    finally:
        store.close()


def _prompts(loaded: Any, rows: int) -> tuple[list[Any], list[list[int]]]:
    """(the first ``rows`` evaluation rows of DATASET, their rendered prompt ids)."""
    from trainer_core.evaluation.rows import to_rows
    from trainer_core.evaluation.sources import plan_data, read_plan
    from trainer_core.serving.generate import render_prompt

    plan = plan_data(loaded.choice, [str(DATASET)], None)
    eval_rows = to_rows(read_plan(plan), plan["source"])[0][:rows]
    return eval_rows, [render_prompt(loaded.tokenizer, row.prompt) for row in eval_rows]


def plain_generate(
    model: Any, tokenizer: Any, rows: list[Any], max_new_tokens: int, batch_size: int, stops: list[int], device: str
) -> tuple[float, int]:
    """(tokens/s, generated tokens) of plain batched greedy ``model.generate`` over the rows' chat
    template prompts, in file order, timed around the whole loop (tokenizing included)."""
    import torch

    from trainer_core.evaluation.generation import cut_at_stop

    texts = [tokenizer.apply_chat_template(row.prompt, tokenize=False, add_generation_prompt=True) for row in rows]
    tokens, began = 0, time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[i : i + batch_size],
                padding=True,
                padding_side="left",
                add_special_tokens=False,
                return_tensors="pt",
            ).to(device)
            out = model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                eos_token_id=stops,
                pad_token_id=tokenizer.pad_token_id,
            )
            tokens += sum(
                len(cut_at_stop(ids, set(stops), max_new_tokens)[0])
                for ids in out[:, batch["input_ids"].shape[1] :].tolist()
            )
    return tokens / (time.perf_counter() - began), tokens


def ours_generate(
    loaded: Any, prompts: list[list[int]], max_new_tokens: int, batch_size: int, stops: list[int]
) -> tuple[float, int]:
    """(tokens/s, generated tokens) of the evaluation's ``generate_answers``, timed around the whole
    call (sorting, padding and decoding the answers included; its own figure times generate only)."""
    from trainer_core.evaluation.generation import generate_answers

    began = time.perf_counter()
    result = generate_answers(loaded.model, loaded.tokenizer, prompts, max_new_tokens, batch_size, stops, loaded.device)
    return result.tokens / (time.perf_counter() - began), result.tokens


def tuned_vs_base(loaded: Any, prompts: list[list[int]], max_new_tokens: int, batch_size: int, rounds: int) -> dict:
    """Generation speed of the tuned model (the adapter merged, as the evaluation runs it) vs its
    base (the adapter off) on the same prompts, A B A B, with no stop token so both sides
    generate exactly ``max_new_tokens`` per row (their answers differ in length, and a batch costs
    as much for a row that stopped early: tokens/s of real answers would compare lengths, not
    speed). Issue 27's target: tuned >= 90 % of base."""
    from trainer_core.evaluation.generation import generate_answers

    speeds: dict[str, list[float]] = {"tuned": [], "base": []}
    for _ in range(rounds):
        for side, use_adapter in (("tuned", True), ("base", False)):
            with loaded.weights(use_adapter) as model:
                began = time.perf_counter()
                result = generate_answers(
                    model, loaded.tokenizer, prompts, max_new_tokens, batch_size, [], loaded.device
                )
                speeds[side].append(round(result.tokens / (time.perf_counter() - began), 2))
    ratios = [round(t / b, 3) for t, b in zip(speeds["tuned"], speeds["base"])]
    return {
        **{f"{k}_tokens_per_s": v for k, v in speeds.items()},
        "pair_ratios": ratios,
        "tuned_vs_base": statistics.median(ratios),
    }


def full_evaluation(loaded_choice: Any, rows: int, max_new_tokens: int, batch_size: int) -> dict:
    """Seconds and scores of a whole default evaluation (tuned + base) over ``rows`` rows."""
    from trainer_core.evaluation.sources import plan_data
    from trainer_core.evaluation.worker import evaluate
    from trainer_core.settings import get_settings

    with tempfile.TemporaryDirectory() as out:
        context = {
            "choice": loaded_choice.model_dump(),
            "models_dir": str(get_settings().models_dir),
            "output_dir": out,
            "data": plan_data(loaded_choice, [str(DATASET)], None),
        }
        began = time.perf_counter()
        result = evaluate(
            {"model": loaded_choice.id, "max_rows": rows, "max_new_tokens": max_new_tokens, "batch_size": batch_size},
            context,
        )
        return {
            "rows": rows,
            "seconds": round(time.perf_counter() - began, 1),
            "load_and_score_s": result.seconds,
            "tokens_per_second": round(result.tokens_per_second, 2),
            "rouge_l_tuned": result.tuned.rouge_l,
            "rouge_l_base": result.base.rouge_l,
        }


def measure(data_dir: Path, quick: bool, rows: int, eval_rows: int) -> dict:
    from trainer_core.serving.generate import stop_token_ids
    from trainer_core.serving.loader import load_choice
    from trainer_core.serving.worker import quiet_libraries
    from trainer_core.settings import get_settings

    quiet_libraries()
    choice = _choice(data_dir)
    loaded = load_choice(choice, get_settings().models_dir)
    max_new, batch = (16, 4) if quick else (64, 8)
    held_out, prompts = _prompts(loaded, rows)
    stops = stop_token_ids(loaded.tokenizer, loaded.model)
    report: dict[str, Any] = {
        "bench": "evaluate",
        "run": choice.id,
        "device": loaded.device,
        "rows": len(prompts),
        "max_new_tokens": max_new,
        "batch_size": batch,
    }
    ours_generate(loaded, prompts[:batch], 2, batch, stops)  # first-call set-up outside the timing
    ours, plain = [], []
    for _ in range(1 if quick else 3):  # A B A B: machine noise hits both sides alike
        ours.append(ours_generate(loaded, prompts, max_new, batch, stops))
        plain.append(plain_generate(loaded.model, loaded.tokenizer, held_out, max_new, batch, stops, loaded.device))
    report["ours_tokens_per_s"] = [round(o[0], 2) for o in ours]
    report["plain_tokens_per_s"] = [round(p[0], 2) for p in plain]
    report["tokens"] = {"ours": ours[0][1], "plain": plain[0][1]}
    report["pair_ratios"] = [round(o[0] / p[0], 3) for o, p in zip(ours, plain)]
    report["ours_vs_plain"] = round(statistics.median(report["pair_ratios"]), 3)
    report["tuned_vs_base"] = tuned_vs_base(loaded, prompts, max_new, batch, 1 if quick else 3)
    del loaded
    if eval_rows:
        report["evaluation"] = full_evaluation(choice, eval_rows, 32 if quick else 128, batch)
    return report


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 rows, 16 new tokens, one round, a 4-row evaluation")
    parser.add_argument("--data-dir", type=Path, help="a studio data dir holding a finished LoRA run")
    parser.add_argument("--rows", type=int, help="rows generated in the speed comparison (default 32; quick 4)")
    parser.add_argument(
        "--eval-rows", type=int, help="rows of the whole timed evaluation (default 50; quick 4; 0: skip)"
    )
    args = parser.parse_args(argv)
    rows = args.rows or (4 if args.quick else 32)
    eval_rows = args.eval_rows if args.eval_rows is not None else (4 if args.quick else 50)
    if args.data_dir is not None:
        report = measure(args.data_dir, args.quick, rows, eval_rows)
    else:
        from bench.chat import _train

        with tempfile.TemporaryDirectory() as tmp:
            _train(Path(tmp))
            report = measure(Path(tmp), args.quick, rows, eval_rows)
    print(json.dumps(report))
    print(
        f"evaluation generation {statistics.median(report['ours_tokens_per_s']):.1f} tokens/s vs plain batched generate "
        f"{statistics.median(report['plain_tokens_per_s']):.1f} tokens/s (median of the pairs {report['ours_vs_plain']:.2f}x "
        f"of {report['pair_ratios']}; {report['tokens']['ours']} vs {report['tokens']['plain']} tokens, {report['rows']} rows, "
        f"batch {report['batch_size']}, max_new_tokens {report['max_new_tokens']}, {report['device']})"
    )
    tb = report["tuned_vs_base"]
    print(
        f"tuned (adapter merged) vs base, {report['max_new_tokens']} tokens a row: "
        f"{statistics.median(tb['tuned_tokens_per_s']):.1f} vs {statistics.median(tb['base_tokens_per_s']):.1f} tokens/s "
        f"({100 * tb['tuned_vs_base']:.0f} %, pairs {tb['pair_ratios']}; target >= 90 %)"
    )
    if "evaluation" in report:
        ev = report["evaluation"]
        print(
            f"whole evaluation of {ev['rows']} rows (tuned + base: loss, answers, scores): {ev['seconds']} s "
            f"({ev['tokens_per_second']} tokens/s generating)"
        )
    return report


if __name__ == "__main__":
    main()
