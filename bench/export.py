"""Export speed and check agreement: the default model's LoRA run exported as a merged model and as
GGUF f16 and q8_0, each with its check, through the same export code as the app's export task (in
this process: the task's worker start, ~5 s of imports, is not counted).

    python -m bench.export [--data-dir DIR] [--merged-dtypes float16 bfloat16 float32] [--skip-gguf]

Without ``--data-dir`` (a studio data dir holding a finished LoRA run) it trains a 3-step LoRA run
of the default model into a temporary folder first (~20 s, not counted). Target (issue 10): merged
+ GGUF f16 + q8_0 with checks in <= 120 s on this machine. Prints one JSON line, then per export its
seconds per stage and its check (tokens equal free-running, next-token predictions equal
teacher-forced, differences at near-ties).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional, get_args

from bench.chat import _train

TARGET_S = 120.0


class _Quiet:
    def put(self, event: Any) -> None:
        pass


def _run_choice(data_dir: Path) -> Any:
    """The newest finished run's final weights in ``data_dir``."""
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.choices import list_choices
    from trainer_core.settings import Settings

    settings = Settings(data_dir=data_dir)
    store = RunStore(settings.db_path)
    try:
        choice = next(c for c in list_choices(store, settings) if c.kind == "final")
    finally:
        store.close()
    return choice


def export_once(choice: Any, fmt: str, dtype: str, parent: Path) -> dict:
    """One export with its check into a new folder under ``parent``; its figures."""
    from trainer_core.export.schemas import ExportRequest
    from trainer_core.export.worker import export
    from trainer_core.settings import get_settings

    out = parent / f"{fmt}-{dtype}"
    out.mkdir()
    context = {"choice": choice.model_dump(), "output_dir": str(out), "models_dir": str(get_settings().models_dir)}
    began = time.perf_counter()
    result = export(ExportRequest(model=choice.id, format=fmt, dtype=dtype), context, _Quiet(), threading.Event())
    check = result.check
    return {
        "format": fmt,
        "dtype": result.dtype,
        "seconds": round(time.perf_counter() - began, 2),
        "stage_seconds": result.stage_seconds,
        "size_mb": round(result.size_bytes / 1e6, 1),
        "passed": result.passed,
        "summary": check.summary,
        "forced_equal": check.forced_tokens_equal,
        "tokens_total": check.tokens_total,
        "near_ties": check.near_ties,
        "problems": check.problems,
    }


def measure(data_dir: Path, merged_dtypes: list[str], gguf: bool) -> dict:
    """Export the run in ``data_dir`` as each merged dtype and (``gguf``) GGUF f16 and q8_0."""
    from trainer_core.serving.worker import quiet_libraries

    quiet_libraries()
    choice = _run_choice(data_dir)
    plan = [("merged", d) for d in merged_dtypes] + (
        [("gguf-f16", "float16"), ("gguf-q8_0", "float16")] if gguf else []
    )
    with tempfile.TemporaryDirectory() as tmp:
        exports = [export_once(choice, fmt, dtype, Path(tmp)) for fmt, dtype in plan]
    total = round(sum(e["seconds"] for e in exports), 1)
    return {"bench": "export", "run": choice.id, "exports": exports, "total_s": total, "target_s": TARGET_S}


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="a studio data dir holding a finished LoRA run")
    from trainer_core.export.schemas import MergeDtype

    parser.add_argument("--merged-dtypes", nargs="+", default=["float16"], choices=get_args(MergeDtype))
    parser.add_argument("--skip-gguf", action="store_true", help="merged exports only")
    args = parser.parse_args(argv)
    if args.data_dir is not None:
        report = measure(args.data_dir, args.merged_dtypes, not args.skip_gguf)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            _train(Path(tmp))
            report = measure(Path(tmp), args.merged_dtypes, not args.skip_gguf)
    print(json.dumps(report))
    for e in report["exports"]:
        stages = ", ".join(f"{k} {v:.1f}" for k, v in e["stage_seconds"].items())
        print(
            f"{e['format']} {e['dtype']}: {e['seconds']:.1f} s ({stages}); {e['size_mb']} MB; "
            f"{'passed' if e['passed'] else 'FAILED'}: {e['summary']}, {e['forced_equal']}/{e['tokens_total']} "
            f"teacher-forced" + (f"; near-ties: {'; '.join(e['near_ties'])}" if e["near_ties"] else "")
        )
    print(f"total {report['total_s']:.1f} s (target <= {TARGET_S:.0f} s)")
    return report


if __name__ == "__main__":
    main()
