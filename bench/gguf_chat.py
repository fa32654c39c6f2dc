"""Chat speed of an exported GGUF in llama.cpp vs the adapter model in transformers (issue 26).

The default model's 3-step LoRA run (trained first, or the run in ``--data-dir``) is exported as
``--type`` (q4_k_m) through the app's export code; then, A B A B, the same chat prompt is answered
greedily with up to ``--max-tokens`` new tokens by (A) the run as trained: the base + LoRA adapter in
transformers, float32, ``model.generate`` in this process; (B) the GGUF in llama.cpp, in its own
process (``llamacpp/probe.py``, op ``generate``), its load not counted; and (C) the same file
through the studio's chat (``ChatEngine`` with the export in its history: the Chat tab's and
``/v1``'s path, the llama.cpp worker ``serving.gguf_worker``), loaded before timing. All use every
core (torch's and llama.cpp's threads = cores). Target: B (and C) >= 3x A in tokens/s.

    python -m bench.gguf_chat [--data-dir DIR] [--type q4_k_m] [--pairs 2] [--max-tokens 128]

Prints one JSON line, then a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional

from bench.chat import LONG_PROMPT, _plain_model, _train, plain_tokens_per_s
from bench.export import _Quiet, _run_choice

TARGET_RATIO = 3.0


def export_gguf(choice: Any, gguf_type: str, out: Path) -> Path:
    """The run exported as ``gguf_type`` into ``out`` (its check must pass); the file's path."""
    from trainer_core.export.schemas import ExportRequest
    from trainer_core.export.worker import export
    from trainer_core.settings import get_settings

    out.mkdir()
    context = {"choice": choice.model_dump(), "output_dir": str(out), "models_dir": str(get_settings().models_dir)}
    result = export(ExportRequest(model=choice.id, format=f"gguf-{gguf_type}"), context, _Quiet(), threading.Event())
    assert result.passed, result.check
    return out / result.gguf[0].name


def llama_tokens_per_s(path: Path, prompt: list[int], max_tokens: int) -> tuple[float, int, float]:
    """(tokens/s, new tokens, load seconds) of one greedy generation in llama.cpp."""
    from trainer_core.llamacpp.client import run_probe
    from trainer_core.settings import get_settings

    answer = run_probe(
        {"op": "generate", "gguf": str(path), "prompt": prompt, "max_tokens": max_tokens, "threads": os.cpu_count()},
        get_settings().llama_cpp_dir,
    )
    return len(answer["tokens"]) / answer["seconds"], len(answer["tokens"]), answer["load_seconds"]


def studio_chat(path: Path, tmp: Path, max_tokens: int) -> Any:
    """A ``ChatEngine`` as the app builds it, with ``path`` as an export's GGUF file in its history
    (``tmp`` its data folder), and a function giving one greedy answer's (tokens/s, new tokens):
    what the Chat tab and ``/v1`` deliver (the llama.cpp worker, its events, the engine's queue)."""
    import time

    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.serving.schemas import ChatMessage, GenerationSettings
    from trainer_core.settings import Settings, get_settings
    from trainer_core.tasks.export_models import ExportModels
    from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
    from trainer_core.tasks.store import TaskStore

    settings = Settings(data_dir=tmp, llama_cpp_dir=get_settings().llama_cpp_dir)
    tasks = TaskStore(settings.db_path)
    task = "export-20261205-000000-bench0"
    entry = {"name": path.name, "type": path.stem.rsplit("-", 1)[-1], "check": {"passed": True}}
    tasks.save(
        TaskRecord(
            task_id=task,
            kind=TaskKind.export,
            model="bench",
            phase=TaskPhase.completed,
            output_dir=str(path.parent),
            result={"gguf": [entry]},
        )
    )
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path), warm_modules=())
    engine = ChatEngine(runner, settings, models=ExportModels(tasks, runner.store, settings))
    engine.load(task)
    messages = [ChatMessage(role="user", content=LONG_PROMPT)]
    greedy = GenerationSettings(temperature=0, max_new_tokens=max_tokens)

    def answer() -> tuple[float, int]:
        began = time.perf_counter()
        event = engine.complete(task, messages, greedy)
        return event.completion_tokens / (time.perf_counter() - began), event.completion_tokens

    return engine, answer


def measure(data_dir: Path, gguf_type: str, pairs: int, max_tokens: int) -> dict:
    """A B A B pairs of (transformers adapter model, llama.cpp GGUF) tokens/s."""
    from trainer_core.serving.worker import quiet_libraries

    quiet_libraries()
    choice = _run_choice(data_dir)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_gguf(choice, gguf_type, Path(tmp) / "export")
        size_mb = round(path.stat().st_size / 1e6, 1)
        engine, studio_answer = studio_chat(path, Path(tmp), max_tokens)
        model, tokenizer = _plain_model(choice)
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": LONG_PROMPT}], tokenize=True, add_generation_prompt=True
        )
        prompt = list(prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt)
        rows = []
        for _ in range(pairs):
            a, a_tokens = plain_tokens_per_s(model, tokenizer, max_tokens)
            b, b_tokens, load = llama_tokens_per_s(path, prompt, max_tokens)
            c, c_tokens = studio_answer()
            rows.append(
                {
                    "transformers": round(a, 1),
                    "tokens_a": a_tokens,
                    "llama_cpp": round(b, 1),
                    "tokens_b": b_tokens,
                    "load_s": round(load, 2),
                    "studio_chat": round(c, 1),
                    "tokens_c": c_tokens,
                }
            )
        engine.unload()
    ratio = statistics.median(r["llama_cpp"] / r["transformers"] for r in rows)
    studio_ratio = statistics.median(r["studio_chat"] / r["transformers"] for r in rows)
    return {
        "bench": "gguf_chat",
        "type": gguf_type,
        "pairs": rows,
        "ratio": round(ratio, 2),
        "studio_chat_ratio": round(studio_ratio, 2),
        "target_ratio": TARGET_RATIO,
        "size_mb": size_mb,
    }


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="a studio data dir holding a finished LoRA run")
    parser.add_argument("--type", default="q4_k_m", help="the GGUF type to export and run")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args(argv)
    if args.data_dir is not None:
        report = measure(args.data_dir, args.type, args.pairs, args.max_tokens)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            _train(Path(tmp))
            report = measure(Path(tmp), args.type, args.pairs, args.max_tokens)
    print(json.dumps(report))
    for r in report["pairs"]:
        print(
            f"transformers (LoRA, float32) {r['transformers']} tokens/s ({r['tokens_a']} tokens) | llama.cpp "
            f"{report['type']} {r['llama_cpp']} tokens/s ({r['tokens_b']} tokens; load {r['load_s']} s) | the studio's "
            f"chat with the GGUF {r['studio_chat']} tokens/s ({r['tokens_c']} tokens)"
        )
    print(
        f"median ratio {report['ratio']}x, through the studio's chat {report['studio_chat_ratio']}x "
        f"(target >= {TARGET_RATIO:.0f}x)"
    )
    return report


if __name__ == "__main__":
    main()
