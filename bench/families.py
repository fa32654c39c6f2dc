"""Every model family end to end with the defaults, on tiny random models (``tests/support/families.py``:
hidden 64, 2 layers, the bundled tokenizer): 2 LoRA steps through the real worker, a greedy chat
answer through the chat engine (tuned and base), and a merged float32 export with its check
(greedy tokens and teacher-forced predictions of the merged model against the adapter model).

    python -m bench.families [--families llama gpt2 ...]

Prints one JSON line per family, then a table: attention used, padding-free or padded batches,
LoRA layers adapted (and how many of them are MoE expert parameters), seconds to train, the chat
answer's token count, and the export check. Outputs of random weights mean nothing; the point is
that each stage works and the merged model answers as the adapter model does.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from bench.export import _Quiet

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "alpaca_en_demo.json"


def one_family(family: str, root: Path) -> dict[str, Any]:
    """Train, chat and export ``family`` under ``root``; its figures (``error`` on a failure)."""
    import threading

    from tests.support.families import build_family_model
    from trainer_core.export.schemas import ExportRequest
    from trainer_core.export.worker import export
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.serving.schemas import ChatMessage, GenerationSettings
    from trainer_core.settings import Settings, get_settings
    from trainer_core.vocabulary import Phase

    report: dict[str, Any] = {"bench": "families", "family": family}
    folder = root / family
    model = build_family_model(family, materialize_default_model(get_settings().models_dir), folder / "model")
    settings = Settings(data_dir=folder / "data", allowed_paths=f"{folder}:{DATASET.parent}")
    store = RunStore(settings.db_path)
    runner = JobRunner(runs_dir=settings.runs_dir, store=store, warm_modules=())
    began = time.perf_counter()
    runner.start(
        TrainingStartRequest(
            model_name=str(model),
            local_datasets=[str(DATASET)],
            max_steps=2,
            batch_size=2,
            max_seq_length=128,
            dataset_slice_end=16,
        )
    )
    runner.wait(600)
    status = runner.status()
    report["train_s"] = round(time.perf_counter() - began, 2)
    if status.phase != Phase.completed:
        store.close()
        return {**report, "error": f"training: {status.error or status.message}"}
    run_json = json.loads((Path(status.details["output_dir"]) / "run.json").read_text())
    structure = run_json["model_structure"]
    report["attention"] = structure["attention"]
    report["padding_free"] = structure["padding_free"]
    report["adapted"] = structure["adapted"]["count"]
    report["expert_parameters"] = len(structure["adapted"]["parameters"])
    engine = ChatEngine(runner, settings)
    try:
        run = next(c for c in engine.choices() if c.kind == "final" and c.adapter)
        greedy = GenerationSettings(temperature=0, max_new_tokens=16)
        messages = [ChatMessage(role="user", content="Who are you?")]
        tuned = engine.complete(run.id, messages, greedy)
        base = engine.complete(run.id, messages, greedy, use_adapter=False)
        report["chat_tokens"] = {"tuned": tuned.completion_tokens, "base": base.completion_tokens}
    except Exception as exc:  # noqa: BLE001 - a family's failure is a row of the table
        return {**report, "error": f"chat: {type(exc).__name__}: {exc}"}
    finally:
        engine.unload()
        store.close()
    out = folder / "merged"
    out.mkdir()
    context = {"choice": run.model_dump(), "output_dir": str(out), "models_dir": str(get_settings().models_dir)}
    began = time.perf_counter()
    try:
        result = export(
            ExportRequest(model=run.id, format="merged", dtype="float32"), context, _Quiet(), threading.Event()
        )
    except Exception as exc:  # noqa: BLE001
        return {**report, "error": f"export: {type(exc).__name__}: {exc}"}
    report["export_s"] = round(time.perf_counter() - began, 2)
    report["export_check"] = result.check.summary if result.check else None
    report["export_passed"] = result.passed
    return report


def table(rows: list[dict[str, Any]]) -> str:
    """The per-family table printed after the JSON lines."""
    lines = [
        f"{'family':<12} {'attention':<12} {'batches':<8} {'LoRA':>5} {'experts':>7} {'train s':>7} "
        f"{'chat':>9} {'merged export check'}"
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['family']:<12} FAILED {r['error'][:100]}")
            continue
        chat = f"{r['chat_tokens']['tuned']}/{r['chat_tokens']['base']}"
        check = ("passed: " if r["export_passed"] else "FAILED: ") + str(r["export_check"])
        lines.append(
            f"{r['family']:<12} {r['attention']:<12} {'packed' if r['padding_free'] else 'padded':<8} "
            f"{r['adapted']:>5} {r['expert_parameters']:>7} {r['train_s']:>7} {chat:>9} {check}"
        )
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> list[dict[str, Any]]:
    from tests.support.families import FAMILIES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families:
            row = one_family(family, Path(tmp))
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
