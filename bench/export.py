"""Export speed and check agreement: the default model's LoRA run exported as a merged model and as
GGUF (one task per ``--gguf`` list: one conversion, then each quantisation by llama.cpp), each file
with its check, through the same export code as the app's export task (in this process: the task's
worker start, ~5 s of imports, is not counted).

    python -m bench.export [--data-dir DIR] [--merged-dtypes float16 ...] [--gguf q4_k_m] [--gguf f16 q8_0]
    python -m bench.export --skip-gguf

Without ``--data-dir`` (a studio data dir holding a finished LoRA run) it trains a 3-step LoRA run
of the default model into a temporary folder first (~20 s, not counted). Targets: merged + GGUF
f16 + q8_0 with checks in <= 120 s (issue 10); a q4_k_m export with its llama.cpp check in <= 90 s
(issue 26). Prints one JSON line, then per export its seconds per stage and per file its check
(tokens equal free-running, next-token predictions equal teacher-forced, near-ties) and, where
transformers reads the file back, its second opinion.
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
Q4_K_M_TARGET_S = 90.0


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


def _check_figures(check: Any) -> dict:
    return {
        "by": check.checked_by,
        "passed": check.passed,
        "summary": check.summary,
        "forced_equal": check.forced_tokens_equal,
        "tokens_total": check.tokens_total,
        "near_ties": check.near_ties,
        "problems": check.problems,
    }


def export_once(choice: Any, fmt: str, dtype: str, parent: Path, more: tuple[str, ...] = ()) -> dict:
    """One export (``more``: further GGUF types in the same task) with its checks into a new folder
    under ``parent``; its figures."""
    from trainer_core.export.schemas import ExportRequest
    from trainer_core.export.worker import export
    from trainer_core.settings import get_settings

    out = parent / "-".join([fmt, dtype, *more])
    out.mkdir()
    context = {"choice": choice.model_dump(), "output_dir": str(out), "models_dir": str(get_settings().models_dir)}
    began = time.perf_counter()
    request = ExportRequest(model=choice.id, format=fmt, dtype=dtype, gguf_types=list(more))
    result = export(request, context, _Quiet(), threading.Event())
    files = [
        {
            "name": g.name,
            "type": g.type,
            "file_type": g.file_type,
            "size_mb": round(g.size_bytes / 1e6, 1),
            "check": _check_figures(g.check),
            "second_opinion": _check_figures(g.second_opinion) if g.second_opinion else None,
        }
        for g in result.gguf
    ]
    return {
        "format": "+".join([fmt, *more]),
        "dtype": result.dtype,
        "seconds": round(time.perf_counter() - began, 2),
        "stage_seconds": result.stage_seconds,
        "size_mb": round(result.size_bytes / 1e6, 1),
        "passed": result.passed,
        "files": files
        or [{"type": fmt, "size_mb": round(result.size_bytes / 1e6, 1), "check": _check_figures(result.check)}],
    }


def measure(data_dir: Path, merged_dtypes: list[str], gguf: list[list[str]]) -> dict:
    """Export the run in ``data_dir`` as each merged dtype and each GGUF task of ``gguf`` (lists
    of types, the first the task's format)."""
    from trainer_core.serving.worker import quiet_libraries

    quiet_libraries()
    choice = _run_choice(data_dir)
    plan = [("merged", d, ()) for d in merged_dtypes] + [(f"gguf-{g[0]}", "float16", tuple(g[1:])) for g in gguf]
    with tempfile.TemporaryDirectory() as tmp:
        exports = [export_once(choice, fmt, dtype, Path(tmp), more) for fmt, dtype, more in plan]
    total = round(sum(e["seconds"] for e in exports), 1)
    return {"bench": "export", "run": choice.id, "exports": exports, "total_s": total, "target_s": TARGET_S}


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="a studio data dir holding a finished LoRA run")
    from trainer_core.export.schemas import GGUF_TYPES, MergeDtype

    parser.add_argument("--merged-dtypes", nargs="+", default=["float16"], choices=get_args(MergeDtype))
    parser.add_argument("--skip-gguf", action="store_true", help="merged exports only")
    parser.add_argument(
        "--gguf",
        nargs="+",
        action="append",
        choices=GGUF_TYPES,
        help="one GGUF export task of these types (repeat for more tasks; default: f16 q8_0, then q4_k_m)",
    )
    args = parser.parse_args(argv)
    gguf = [] if args.skip_gguf else (args.gguf or [["f16", "q8_0"], ["q4_k_m"]])
    if args.data_dir is not None:
        report = measure(args.data_dir, args.merged_dtypes, gguf)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            _train(Path(tmp))
            report = measure(Path(tmp), args.merged_dtypes, gguf)
    print(json.dumps(report))
    for e in report["exports"]:
        stages = ", ".join(f"{k} {v:.1f}" for k, v in e["stage_seconds"].items())
        print(f"{e['format']} {e['dtype']}: {e['seconds']:.1f} s ({stages}); {e['size_mb']} MB")
        for f in e["files"]:
            for label, c in (("check", f["check"]), ("second opinion", f.get("second_opinion"))):
                if c:
                    print(
                        f"  {f['type']} {f.get('file_type', '')} {f['size_mb']} MB {label} ({c['by']}): "
                        f"{'passed' if c['passed'] else 'FAILED'}: {c['summary']}, {c['forced_equal']}/"
                        f"{c['tokens_total']} teacher-forced"
                        + (f"; near-ties: {'; '.join(c['near_ties'])}" if c["near_ties"] else "")
                        + (f"; problems: {'; '.join(c['problems'])}" if c["problems"] else "")
                    )
        if e["format"] == "gguf-q4_k_m":
            print(f"  q4_k_m alone: {e['seconds']:.1f} s (target <= {Q4_K_M_TARGET_S:.0f} s)")
    print(f"total {report['total_s']:.1f} s (target <= {TARGET_S:.0f} s for merged + GGUF f16 + q8_0)")
    return report


if __name__ == "__main__":
    main()
