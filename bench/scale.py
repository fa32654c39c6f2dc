"""The pre-flight check at the size users bring data, beside a bare ``datasets`` script.

    python -m bench.scale [--rows 100000 1000000] [--formats jsonl parquet] [--repeats 2]
                          [--first-only] [--sample-mb MB] [--dir DIR] [--out FILE] [--quick]

Makes the files (the shared Alpaca rows, ``../shared/datasets/alpaca_en_demo.json``, repeated to
``--rows`` rows, as JSON lines and Parquet in row groups of 10,000) under ``--dir`` (a temporary
folder unless given; never the repository), then for each file runs, A B A B (``--repeats`` pairs):

- ``bare``: a fresh process that loads the file with ``datasets.load_dataset`` and tokenizes every
  row through the model's chat template with ``map(batched=True, num_proc=2)``;
- ``check``: a fresh ``python -m trainer_core check --json`` (the CLI a user runs; the default
  model SmolLM2-135M-Instruct and request; a data dir of its own, so no token cache entry of an
  earlier run serves it), whose first line is the estimate from a sample (files
  over ``--sample-mb``, the setting ``STUDIO_CHECK_SAMPLE_MB``) and whose last is the exact report.
  Timed: the first answer and the full pass (``--first-only``: the process is ended after the first
  answer, for files whose full pass takes too long to wait for).

Each side's wall time and peak RSS (the sum over its process tree, psutil every 0.1 s) are printed,
with the estimate's steps and trained tokens against the exact ones. ``--quick``: one 20,000-row
JSON lines file, one pair. Prints one JSON line (also written to ``--out``), then a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
ALPACA = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"
GROUP_ROWS = 10_000  # Parquet row group size
POLL_S = 0.1


def make_file(folder: Path, rows: int, kind: str) -> Path:
    """``rows`` Alpaca rows (the shared ones, repeated) as ``folder/alpaca_<rows>.<kind>``; kept
    when already there."""
    path = folder / f"alpaca_{rows}.{kind}"
    if path.is_file():
        return path
    base = json.loads(ALPACA.read_text())
    if kind == "jsonl":
        lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in base]
        with path.open("w") as handle:
            for i in range(rows):
                handle.write(lines[i % len(lines)])
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist([base[i % len(base)] for i in range(rows)])
        pq.write_table(table, path, row_group_size=GROUP_ROWS)
    return path


def bare(path: str, model: str) -> dict[str, Any]:
    """The bare script (run in its own process): load, then tokenize every row through the chat
    template with ``map(batched=True, num_proc=2)``. Returns rows and tokens."""
    import datasets
    from transformers import AutoTokenizer

    from trainer_core.data.preview_tokenizer import local_model_folder
    from trainer_core.settings import get_settings

    tokenizer = AutoTokenizer.from_pretrained(str(local_model_folder(model, get_settings())))

    def encode(batch: dict[str, list]) -> dict[str, list]:
        texts = []
        for instruction, extra, output in zip(batch["instruction"], batch["input"], batch["output"]):
            user = f"{instruction}\n\n{extra}" if extra else instruction
            messages = [{"role": "user", "content": user}, {"role": "assistant", "content": output}]
            texts.append(tokenizer.apply_chat_template(messages, tokenize=False))
        return {"input_ids": tokenizer(texts, add_special_tokens=False)["input_ids"]}

    with tempfile.TemporaryDirectory(prefix="bench-scale-cache-") as cache:
        builder = "parquet" if path.endswith(".parquet") else "json"
        rows = datasets.load_dataset(builder, data_files=[path], split="train", cache_dir=cache)
        encoded = rows.map(encode, batched=True, num_proc=2, remove_columns=rows.column_names)
        tokens = sum(len(ids) for ids in encoded["input_ids"])
    return {"rows": len(encoded), "tokens": tokens}


def _tree_rss(root: Any) -> int:
    """Resident bytes of psutil process ``root`` and its children (those that end meanwhile: 0)."""
    import psutil

    total = 0
    try:
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for process in tree:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


class TreeMemory:
    """Peak RSS (MiB) of a process and its children, read every POLL_S s on a thread."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.peak = 0.0
        self._root = psutil.Process(pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set() and self._root.is_running():
            self.peak = max(self.peak, _tree_rss(self._root) / 2**20)
            time.sleep(POLL_S)

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return round(self.peak, 1)


def run_bare(path: Path, model: str) -> dict[str, Any]:
    """The bare side in a fresh process: wall seconds, peak RSS, rows and tokens."""
    code = "import json, sys; from bench.scale import bare; print(json.dumps(bare(sys.argv[1], sys.argv[2])))"
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(path), model], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    memory = TreeMemory(process.pid)
    out, _ = process.communicate()
    wall, peak = time.perf_counter() - began, memory.stop()
    if process.returncode:
        raise RuntimeError(f"the bare script failed on {path.name} (exit {process.returncode})")
    return {"side": "bare", "wall_s": round(wall, 1), "peak_rss_mib": peak, **json.loads(out.splitlines()[-1])}


def run_check(path: Path, model: str, sample_mb: Optional[float], first_only: bool) -> dict[str, Any]:
    """The CLI check in a fresh process: seconds to its first answer and to the exact one, peak
    RSS, and the estimate's figures against the exact ones."""
    data = tempfile.mkdtemp(prefix="bench-scale-data-")  # a cold token cache: nothing of an earlier run served
    env = dict(os.environ, STUDIO_ALLOWED_PATHS=str(path.parent), NO_COLOR="1", STUDIO_DATA_DIR=data)
    if sample_mb is not None:
        env["STUDIO_CHECK_SAMPLE_MB"] = str(sample_mb)
    argv = [sys.executable, "-m", "trainer_core", "check", "--dataset", str(path), "--model-name", model, "--json"]
    began = time.perf_counter()
    process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    memory = TreeMemory(process.pid)
    answers, times = [], []
    for line in process.stdout:  # type: ignore[union-attr]
        answers.append(json.loads(line))
        times.append(round(time.perf_counter() - began, 1))
        if first_only:
            process.terminate()
            break
    process.wait()
    peak = memory.stop()
    shutil.rmtree(data, ignore_errors=True)
    if not answers:
        raise RuntimeError(f"the check printed nothing for {path.name} (exit {process.returncode})")
    first, last = answers[0], answers[-1]
    out: dict[str, Any] = {"side": "check", "first_answer_s": times[0], "peak_rss_mib": peak}
    out["sampled"] = first.get("estimate") is not None
    if out["sampled"]:
        out["basis"] = first["estimate"]["basis"]
    if len(answers) > 1 or not out["sampled"]:
        out["wall_s"] = times[-1]
        for field in ("total_steps", "tokens_trained"):
            out[field] = {"estimate": first[field], "exact": last[field]}
            if last[field]:
                out[field]["error_pct"] = round(100 * (first[field] - last[field]) / last[field], 2)
    else:
        out["wall_s"] = None  # ended after the first answer
        out.update({field: {"estimate": first[field]} for field in ("total_steps", "tokens_trained")})
    return out


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--formats", nargs="+", choices=["jsonl", "parquet"], default=["jsonl", "parquet"])
    parser.add_argument("--repeats", type=int, default=2, help="A B pairs per file")
    parser.add_argument("--sides", nargs="+", choices=["bare", "check"], default=["bare", "check"])
    parser.add_argument("--first-only", action="store_true", help="end each check after its first answer")
    parser.add_argument("--sample-mb", type=float, default=None, help="STUDIO_CHECK_SAMPLE_MB for the check")
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--dir", type=Path, default=None, help="where the files are made (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="one 20,000-row JSON lines file, one pair")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows = [20_000] if args.rows == parser.get_default("rows") else args.rows
        args.formats, args.repeats = ["jsonl"], 1
    folder = args.dir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"bench": "scale", "load": os.getloadavg(), "cpus": os.cpu_count(), "files": []}
    for rows in args.rows:
        for kind in args.formats:
            path = make_file(folder, rows, kind)
            runs = []
            for _ in range(args.repeats):
                for side in args.sides:
                    if side == "bare":
                        runs.append(run_bare(path, args.model))
                    else:
                        runs.append(run_check(path, args.model, args.sample_mb, args.first_only))
                    print(json.dumps({"file": path.name, **runs[-1]}), file=sys.stderr, flush=True)
            report["files"].append(
                {"file": path.name, "rows": rows, "mb": round(path.stat().st_size / 2**20, 1), "runs": runs}
            )
    report["load_after"] = os.getloadavg()
    line = json.dumps(report)
    print(line)
    if args.out:
        args.out.write_text(line + "\n")
    _summary(report)
    return report


def _summary(report: dict[str, Any]) -> None:
    print(f"\nload average {report['load'][0]:.1f} -> {report['load_after'][0]:.1f}, {report['cpus']} CPUs")
    for entry in report["files"]:
        for side in ("bare", "check"):
            runs = [r for r in entry["runs"] if r["side"] == side]
            if not runs:
                continue
            walls = [r["wall_s"] for r in runs if r.get("wall_s") is not None]
            wall = f"wall median {statistics.median(walls):.1f} s" if walls else "full pass not waited for"
            first = (
                f", first answer {statistics.median(r['first_answer_s'] for r in runs):.1f} s"
                if side == "check"
                else ""
            )
            rss = max(r["peak_rss_mib"] for r in runs)
            print(f"{entry['file']} ({entry['mb']} MB) {side}: {wall}{first}, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
