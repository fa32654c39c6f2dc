"""Defaults that teach (issue 12, 2b): does a run with every setting at its default learn a small
dataset, and do the candidate defaults leave a general model intact?

Teach: trains LoRA runs of the default model through the app's ``JobRunner`` (the real worker
process) on ``identity.json`` with its placeholders filled (name "Nova", author "Finetune Studio",
91 rows) under each candidate setting, then asks 4 held-out "who are you"-style prompts (none of
them in the file) greedily through the chat template with the adapter loaded by PEFT and counts
the answers naming "Nova". It also reports the answer loss (nats per answer token, teacher-forced,
as the evaluation computes it) of the held-out prompts' reference answers ("I am Nova, ..."):
before training it is the base model's.

Keep: the answer loss of Alpaca rows 900..900+N-1 (``--alpaca-held-out``, default 50) under each
identity-tuned model, beside the base model's: did learning the identity wreck general answers?
``--alpaca NAME ...`` also trains each named candidate on Alpaca rows 0..``--alpaca-rows``-1 (200)
and reports the same held-out loss after it (slow on CPU: not run for the figures in the docs).

    python -m bench.defaults [--quick] [--candidates NAME ...] [--alpaca NAME ...] [--out FILE]

Prints a line per run and writes docs/bench-results/defaults.json after each run (``--out``).
Without arguments it runs every candidate in CANDIDATES (hours on 2 CPU cores). ``--quick``: the
defaults on identity only, no Alpaca figures. Every run uses the schema's defaults except the
fields the candidate names (so "defaults" always means the current ones).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
RESULTS = REPO / "docs" / "bench-results" / "defaults.json"
NAME, AUTHOR = "Nova", "Finetune Studio"
# Held out: none of these instructions is in identity.json.
PROMPTS = [
    "Please tell me your name.",
    "What should I call you?",
    "Who am I talking to?",
    "Introduce yourself in one sentence.",
]
REFERENCE = f"I am {NAME}, an AI assistant developed by {AUTHOR}. How can I assist you today?"
# Candidate settings: overrides of the request's defaults. "before" = the defaults before issue 12.
CANDIDATES: dict[str, dict[str, Any]] = {
    "before: 1 epoch, lr 2e-4": dict(num_epochs=1.0, learning_rate=2e-4, max_steps=0),
    "3 epochs, lr 2e-4": dict(num_epochs=3.0, learning_rate=2e-4, max_steps=0),
    "1 epoch, lr 1e-3": dict(num_epochs=1.0, learning_rate=1e-3, max_steps=0),
    "3 epochs, lr 5e-4": dict(num_epochs=3.0, learning_rate=5e-4, max_steps=0),
    "3 epochs, lr 1e-3": dict(num_epochs=3.0, learning_rate=1e-3, max_steps=0),
    "60 steps, lr 2e-4, batch 8": dict(max_steps=60, learning_rate=2e-4, batch_size=8),
    "60 steps, lr 1e-3, batch 8": dict(max_steps=60, learning_rate=1e-3, batch_size=8),
    "defaults": {},
}


def filled_identity(folder: Path, rows: int = 0) -> Path:
    """identity.json with {{name}} / {{author}} filled in (NAME, AUTHOR) by the page's own code
    (``data.fill.fill_file``: the Train form's *Fill in*), in ``folder``; ``rows`` > 0 keeps only
    the first ``rows`` rows. Returns the new file's path."""
    from trainer_core.data.fill import fill_file

    path, _ = fill_file(DATASETS / "identity.json", {"name": NAME, "author": AUTHOR}, folder)
    if rows:
        data = json.loads(path.read_text(encoding="utf-8"))
        path = folder / "identity_filled.json"
        path.write_text(json.dumps(data[:rows], ensure_ascii=False), encoding="utf-8")
    return path


def train(dataset: Path, runs_dir: Path, **overrides: Any) -> tuple[Path, dict[str, Any]]:
    """Train a LoRA run of the default model on ``dataset`` with the schema's defaults plus
    ``overrides`` through ``JobRunner`` (the app's worker process). Returns (the run's output
    folder, facts: total_steps, final loss, seconds). Raises RuntimeError when the run fails."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.vocabulary import Phase

    runner = JobRunner(runs_dir=runs_dir, warm_modules=())
    began = time.perf_counter()
    response = runner.start(TrainingStartRequest(local_datasets=[str(dataset)], **overrides))
    if response.status != "queued" or not runner.wait(1800):
        raise RuntimeError(f"training did not run: {response.error or 'timed out after 1800 s'}")
    status = runner.status()
    if status.phase != Phase.completed:
        raise RuntimeError(f"training ended {status.phase.value}: {status.error or status.message}")
    events = runner.history.events(after_step=0)
    losses = [e.loss for e in events if e.loss is not None]
    return Path(status.details["output_dir"]), {
        "total_steps": events[-1].total_steps if events else 0,
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "train_seconds": round(time.perf_counter() - began, 1),
    }


def load(adapter: Path | None) -> tuple[Any, Any]:
    """(model in eval mode on CPU, tokenizer): the default model, with the LoRA ``adapter`` folder
    loaded by PEFT when given."""
    from transformers import AutoModelForCausalLM

    from trainer_core.models.loading import load_tokenizer, resolve_model_path
    from trainer_core.request.model import DEFAULT_MODEL
    from trainer_core.settings import get_settings

    path = resolve_model_path(DEFAULT_MODEL, None, get_settings().models_dir)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    return model.eval(), load_tokenizer(path)


def answers(model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int = 40) -> list[str]:
    """Greedy answers to single-turn ``prompts`` through the chat template (the evaluation's
    batched generation)."""
    from trainer_core.evaluation.generation import generate_answers
    from trainer_core.serving.generate import render_prompt, stop_token_ids

    ids = [render_prompt(tokenizer, [{"role": "user", "content": p}]) for p in prompts]
    result = generate_answers(model, tokenizer, ids, max_new_tokens, 4, stop_token_ids(tokenizer, model), "cpu")
    return [a.text for a in result.answers]


def answer_loss(model: Any, tokenizer: Any, pairs: list[tuple[str, str]], max_seq_length: int = 512) -> float:
    """Mean cross-entropy (nats per answer token) of the (prompt, answer) ``pairs``' answers."""
    from trainer_core.evaluation import loss
    from trainer_core.evaluation.rows import EvalRow

    rows = [EvalRow(i, [{"role": "user", "content": p}], a) for i, (p, a) in enumerate(pairs)]
    encoded, _, _ = loss.tokenize_rows(rows, tokenizer, max_seq_length)
    return loss.answer_loss(model, encoded, tokenizer.pad_token_id, "cpu", 8).loss


def name_count(texts: list[str], name: str = NAME) -> int:
    """How many of ``texts`` contain ``name`` (case-insensitive; NAME unless given, e.g. AUTHOR)."""
    return sum(name.lower() in t.lower() for t in texts)


def teach(name: str, overrides: dict[str, Any], work: Path, alpaca_rows: int) -> dict[str, Any]:
    """One identity candidate: train, then name count, held-out answer loss and the answer loss of
    ``alpaca_rows`` Alpaca rows (from row 900: did learning the identity wreck general answers?)."""
    folder, facts = train(filled_identity(work), work / "runs", **overrides)
    model, tokenizer = load(folder)
    said = answers(model, tokenizer, PROMPTS)
    held_out = answer_loss(model, tokenizer, [(p, REFERENCE) for p in PROMPTS])
    general = answer_loss(model, tokenizer, alpaca_pairs(900, 900 + alpaca_rows)) if alpaca_rows else None
    return {
        "candidate": name,
        "overrides": overrides,
        **facts,
        "named": name_count(said),
        "author_named": name_count(said, AUTHOR),
        "held_out_loss": round(held_out, 4),
        "alpaca_held_out_loss": general and round(general, 4),
        "answers": said,
    }


def alpaca_pairs(start: int, end: int) -> list[tuple[str, str]]:
    """(prompt, answer) pairs of alpaca_en_demo rows start..end-1 (instruction + input as the prompt)."""
    rows = json.loads((DATASETS / "alpaca_en_demo.json").read_text(encoding="utf-8"))[start:end]
    return [("\n\n".join(filter(None, (r["instruction"], r.get("input", "")))), r["output"]) for r in rows]


def keep(name: str, overrides: dict[str, Any], work: Path, rows: int, held_out: int) -> dict[str, Any]:
    """One Alpaca candidate: train on rows 0..rows-1, answer loss of rows 900..900+held_out-1 after."""
    folder, facts = train(DATASETS / "alpaca_en_demo.json", work / "runs", dataset_slice_end=rows, **overrides)
    model, tokenizer = load(folder)
    return {
        "candidate": name,
        "overrides": overrides,
        "train_rows": rows,
        **facts,
        "alpaca_held_out_loss": round(answer_loss(model, tokenizer, alpaca_pairs(900, 900 + held_out)), 4),
    }


def _write(out: Path, base: dict[str, Any], identity: list[dict[str, Any]], alpaca: list[dict[str, Any]]) -> None:
    """Write the results so far (the schema's defaults, base model, identity and Alpaca rows) to ``out``."""
    from trainer_core.schemas import TrainingStartRequest

    defaults = {
        k: TrainingStartRequest.model_fields[k].default
        for k in ("num_epochs", "max_steps", "learning_rate", "batch_size")
    }
    out.write_text(
        json.dumps(
            {"defaults": defaults, "base": base, "identity": identity, "alpaca": alpaca, "prompts": PROMPTS},
            indent=2,
            ensure_ascii=False,
        )
        + "\n"
    )


def main() -> None:
    """Run the chosen candidates, print a table, write RESULTS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the defaults on identity only, no Alpaca figures")
    parser.add_argument("--candidates", nargs="*", default=None, help="identity candidates (names in CANDIDATES)")
    parser.add_argument("--alpaca", nargs="*", default=None, help="alpaca candidates (names in CANDIDATES)")
    parser.add_argument("--alpaca-rows", type=int, default=200, help="Alpaca training rows (first N)")
    parser.add_argument("--alpaca-held-out", type=int, default=50, help="Alpaca held-out rows (from row 900)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON results")
    parser.add_argument("--no-base", action="store_true", help="skip the base model's figures")
    args = parser.parse_args()
    if args.quick:
        args.alpaca_held_out = 0
    chosen = args.candidates if args.candidates is not None else (["defaults"] if args.quick else list(CANDIDATES))
    on_alpaca = args.alpaca if args.alpaca is not None else []
    base: dict[str, Any] = {}
    if not args.no_base:
        base_model, tokenizer = load(None)
        base = {
            "named": name_count(answers(base_model, tokenizer, PROMPTS)),
            "held_out_loss": round(answer_loss(base_model, tokenizer, [(p, REFERENCE) for p in PROMPTS]), 4),
        }
        base["alpaca_held_out_loss"] = (
            round(answer_loss(base_model, tokenizer, alpaca_pairs(900, 900 + args.alpaca_held_out)), 4)
            if args.alpaca_held_out
            else None
        )
        print(
            f"base model: names {NAME} in {base['named']}/4; held-out identity loss {base['held_out_loss']}; "
            f"alpaca held-out loss {base['alpaca_held_out_loss']}",
            flush=True,
        )
    teach_rows: list[dict[str, Any]] = []
    keep_rows: list[dict[str, Any]] = []
    write = lambda: _write(args.out, base, teach_rows, keep_rows)  # noqa: E731 - after every run
    write()
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            teach_rows.append(row := teach(name, CANDIDATES[name], Path(tmp), args.alpaca_held_out))
            print(
                f"{name:30s} steps {row['total_steps']:4d}  named {row['named']}/4  author {row['author_named']}/4  held-out loss "
                f"{row['held_out_loss']:.3f}  alpaca loss {row['alpaca_held_out_loss']}  final train loss {row['final_loss']:.3f}  {row['train_seconds']:.0f} s",
                flush=True,
            )
            write()
        for name in on_alpaca:
            keep_rows.append(row := keep(name, CANDIDATES[name], Path(tmp), args.alpaca_rows, args.alpaca_held_out))
            print(
                f"alpaca {name:23s} steps {row['total_steps']:4d}  held-out loss {row['alpaca_held_out_loss']:.3f} "
                f"(base {base.get('alpaca_held_out_loss')})  {row['train_seconds']:.0f} s",
                flush=True,
            )
            write()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
