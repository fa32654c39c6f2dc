"""Tokenize once: the studio's data stage against a bare ``datasets`` script on the same file.

    python -m bench.tokenize_once [--rows 50000] [--rounds 2] [--out FILE]

Makes a JSONL of ``--rows`` rows from ``../shared/datasets/alpaca_en_demo.json`` (cycled, each
instruction numbered so no two rows are equal), then runs, each in a fresh process, A B A B:

- ``bare``: ``load_dataset("json")`` and ``map(batched=True, num_proc=<cores>)`` rendering every
  row through the model's chat template and tokenizing it (what a user would write by hand);
- ``studio``: ``data.prepared.prepare_data`` on an empty token cache (read, normalise, tokenize on
  every core into the cache's Arrow files, drop untrained rows);
- ``studio_hit`` (after each ``studio``): ``prepare_data`` again in a new process, from the cache;
- ``check`` (once): the check's exact pass (``preflight.gather``) on an empty cache.

For each it reports wall seconds of the data work (imports and tokenizer load excluded) and peak
RSS: the process's own (``ru_maxrss``) and its largest child's (the ``num_proc`` workers). Prints one
JSON line a run and writes them all to ``--out``. SmolLM2-135M-Instruct's tokenizer (the bundled
default model) is used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ALPACA = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"

BARE = """
import os, resource, sys, time
from transformers import AutoTokenizer
import datasets
tok = AutoTokenizer.from_pretrained(sys.argv[2])
started = time.perf_counter()
rows = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[3])
def encode(batch):
    chats = [[{"role": "user", "content": (i + "\\n\\n" + x).strip()}, {"role": "assistant", "content": o}]
             for i, x, o in zip(batch["instruction"], batch["input"], batch["output"])]
    return {"input_ids": tok.apply_chat_template(chats, tokenize=True, return_dict=True)["input_ids"]}
out = rows.map(encode, batched=True, num_proc=len(os.sched_getaffinity(0)), remove_columns=rows.column_names)
print(len(out), time.perf_counter() - started)
"""

STUDIO = """
import logging, resource, sys, time
from pathlib import Path
from trainer_core.models.loading import load_tokenizer
from trainer_core.schemas import TrainingStartRequest
from trainer_core.data.prepared import prepare_data
from trainer_core.preflight.gather import gather
tok = load_tokenizer(Path(sys.argv[2]))
request = TrainingStartRequest(local_datasets=[sys.argv[1]], max_seq_length=2048)
started = time.perf_counter()
if sys.argv[3] == "check":
    found = gather(request, tok, notes=False)
    rows, line = len(found.train_encoded), found.cache.line()
else:
    data = prepare_data(request, tok)
    rows, line = len(data.train), data.cache.line()
print(rows, time.perf_counter() - started, line)
"""

TAIL = """
import resource
print("RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def make_file(rows: int, folder: Path) -> Path:
    """``rows`` Alpaca rows as JSONL in ``folder`` (the demo's 999 cycled, instructions numbered)."""
    demo = json.loads(ALPACA.read_text())
    path = folder / f"alpaca_{rows}.jsonl"
    with path.open("w") as fh:
        for i in range(rows):
            row = dict(demo[i % len(demo)])
            row["instruction"] = f"{row['instruction']} (#{i})"
            fh.write(json.dumps(row) + "\n")
    return path


def run(name: str, code: str, args: list[str], env: dict[str, str]) -> dict:
    """One measured run in a fresh process: rows, seconds, peak RSS (MB) of it and its largest child."""
    done = subprocess.run(
        [sys.executable, "-c", code + TAIL, *args], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    if done.returncode:
        raise RuntimeError(f"{name} failed: {done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    rss = lines[-1].split()
    first = lines[-2].split(maxsplit=2)
    result = {
        "run": name,
        "rows": int(first[0]),
        "seconds": round(float(first[1]), 1),
        "peak_rss_mb": round(int(rss[1]) / 1024),
        "largest_child_rss_mb": round(int(rss[2]) / 1024),
    }
    if len(first) > 2:
        result["log"] = first[2]
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    """Make the file, run the four kinds A B A B, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.settings import get_settings

    model = str(materialize_default_model(get_settings().models_dir))
    results = []
    with tempfile.TemporaryDirectory(prefix="tokenize-once-") as tmp:
        folder = Path(tmp)
        data = str(make_file(args.rows, folder))
        for round_ in range(args.rounds):
            env = {**os.environ, "STUDIO_DATA_DIR": str(folder / f"data{round_}"), "STUDIO_TOKEN_CACHE_MB": "10240"}
            env["PYTHONPATH"] = str(REPO)
            results.append(run("bare", BARE, [data, model, str(folder / f"hf{round_}")], env))
            results.append(run("studio", STUDIO, [data, model, "start"], env))
            results.append(run("studio_hit", STUDIO, [data, model, "start"], env))
        env = {**env, "STUDIO_DATA_DIR": str(folder / "data-check")}
        results.append(run("check", STUDIO, [data, model, "check"], env))
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in results))


if __name__ == "__main__":
    main()
