"""The audio kinds' pre-flight estimates against measured runs: peak memory and run time.

    python -m bench.audio_estimates [--cases whisper whisper_tiny_size csm audio_chat] [--steps 6]
                                    [--quick] [--out FILE]

For each case the check (``run_preflight``, as the app runs it) estimates the peak memory and the
time from Start to completed, then the run trains through the app's job runner in a fresh child
process (``bench.preflight.run_child``: its worker's peak RSS and Start -> completed seconds,
training seconds from the run history), and the errors are reported (signed, % of measured). The
longest batch the check estimates is the one every step trains: each case's rows fit in one batch.

Cases (LoRA r16 on every linear layer, batch 2 or the rows, fp32, ``--steps`` steps):

- ``whisper``: the tiny random Whisper of ``bench.whisper_model`` (d_model 64, 8 s windows: 400
  encoder frames a clip) on the four demo clips with their transcripts (batch 4: one step an epoch);
- ``whisper_tiny_size``: a random Whisper of openai/whisper-tiny's shape (``WHISPER_TINY_SIZE``:
  39 M parameters, 30 s windows of 1500 frames, a 51,865-word head) on the same clips;
- ``csm``: the tiny random CSM of ``bench.csm_model`` on its two clips with speakers;
- ``audio_chat``: the tiny random Qwen2-Audio of ``bench.audio_chat_model`` on
  ``mllm_audio_demo.json`` (the text path's estimates, the clips' audio tokens counted).

Prints one JSON line (also written to ``--out``), then a line per case.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "docs" / "bench-results" / "audio-estimates.json"
CASES = ("whisper", "whisper_tiny_size", "csm", "audio_chat")
SETTINGS = {"lora_r": 16, "learning_rate": 1e-4, "mixed_precision": "no", "random_seed": 42}


def _whisper(folder: Path, sized: bool) -> tuple[Path, Path, dict]:
    from bench.whisper_model import WHISPER_TINY_SIZE, build_tiny_whisper, speech_file

    if sized:
        model = build_tiny_whisper(folder / "whisper-tiny-size", shape=WHISPER_TINY_SIZE, chunk_seconds=30)
    else:
        model = build_tiny_whisper(folder / "whisper-tiny-random")
    return model, speech_file(folder / "speech"), {"batch_size": 4, "max_seq_length": 64, "language": "en"}


def _csm(folder: Path) -> tuple[Path, Path, dict]:
    from bench.csm_model import build_tiny_csm, tts_file

    return (
        build_tiny_csm(folder / "csm-tiny-random"),
        tts_file(folder / "tts"),
        {"batch_size": 2, "max_seq_length": 512},
    )


def _audio_chat(folder: Path) -> tuple[Path, Path, dict]:
    from bench.audio_chat_model import build_tiny_qwen2_audio
    from bench.speech import AUDIO_CHAT_DATA
    from trainer_core.models.loading import materialize_default_tokenizer
    from trainer_core.settings import get_settings

    tokenizer = materialize_default_tokenizer(get_settings().models_dir)
    model = build_tiny_qwen2_audio(tokenizer, folder / "Qwen2-Audio-tiny")
    return model, AUDIO_CHAT_DATA, {"batch_size": 3, "max_seq_length": 1024}


BUILDERS: dict[str, Callable[[Path], tuple[Path, Path, dict]]] = {
    "whisper": lambda folder: _whisper(folder, False),
    "whisper_tiny_size": lambda folder: _whisper(folder, True),
    "csm": _csm,
    "audio_chat": _audio_chat,
}


def _error(estimate: float, measured: float) -> float:
    """Signed error of ``estimate`` against ``measured`` in % of measured."""
    return round(100.0 * (estimate - measured) / measured, 1)


def measure_case(case: str, folder: Path, steps: int) -> dict[str, Any]:
    """The check's estimates of ``case``, its measured run (``bench.preflight._spawn_run``), and
    their errors."""
    from bench.preflight import _spawn_run
    from trainer_core.preflight import speed_probe, timing
    from trainer_core.preflight.check import run_preflight
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import get_settings

    model, data, fields = BUILDERS[case](folder)
    request = TrainingStartRequest(
        model_name=str(model), local_datasets=[str(data)], max_steps=steps, **SETTINGS, **fields
    )
    report = run_preflight(request, get_settings())
    if report.errors or report.memory is None:
        raise RuntimeError(f"{case}: the check gave no estimates: {report.errors} {report.no_estimates}")
    memory, time_ = report.memory, report.time
    rate_before = timing.machine_gflops("cpu")  # the check's (kept per machine)
    run = _spawn_run(request, Path(get_settings().data_dir))
    rate_after = speed_probe.probe("cpu").gflops
    per_step = run["training_seconds"] / max(run["steps"], 1)
    estimated_step = time_.parts_seconds["train_steps"] / max(report.total_steps, 1)
    return {
        "case": case,
        "settings": {"batch_size": request.batch_size, "max_steps": steps, "lora_r": request.lora_r},
        "line": report.vision,
        "tokens_total": report.tokens_total,
        "memory_estimate": memory.model_dump(),
        "time_estimate": time_.model_dump(),
        "run": run,
        "memory_error_percent": _error(memory.total_gib, run["peak_rss_gib"]),
        "memory_above_runtime_error_percent": _error(
            memory.total_gib - memory.parts_gib["runtime"], run["peak_rss_gib"] - memory.parts_gib["runtime"]
        ),
        "time_error_percent": _error(time_.total_seconds, run["wall_seconds"]),
        "step_seconds_estimated_measured": [round(estimated_step, 3), round(per_step, 3)],
        "step_error_percent": _error(estimated_step, per_step),
        "matmul_gflops_check_after": [round(rate_before, 1), round(rate_after, 1)],
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per run (default 6)")
    parser.add_argument("--quick", action="store_true", help="the tiny Whisper alone, 2 steps: checks the script")
    parser.add_argument("--out", type=Path, help=f"JSON file to write (default {DEFAULT_OUT}; none with --quick)")
    args = parser.parse_args(argv)
    cases, steps = (["whisper"], 2) if args.quick else (args.cases, args.steps)
    with tempfile.TemporaryDirectory(prefix="bench-audio-estimates-") as scratch:
        os.environ["STUDIO_DATA_DIR"] = scratch  # the models, data and runs lie inside it: allowed paths
        from trainer_core.settings import get_settings

        get_settings.cache_clear()
        results = [measure_case(case, Path(scratch), steps) for case in cases]
    report = {"bench": "audio_estimates", "steps": steps, "results": results}
    print(json.dumps(report))
    out = args.out or (None if args.quick else DEFAULT_OUT)
    if out is not None:
        out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    for r in results:
        m, run = r["memory_estimate"], r["run"]
        print(
            f"{r['case']}: memory {m['total_gib']:.3f} GiB estimated vs {run['peak_rss_gib']:.3f} GiB peak RSS "
            f"({r['memory_error_percent']:+.1f} %; above the runtime {r['memory_above_runtime_error_percent']:+.1f} %); "
            f"time {r['time_estimate']['total_seconds']:.0f} s vs {run['wall_seconds']:.0f} s "
            f"({r['time_error_percent']:+.1f} %); step {r['step_seconds_estimated_measured'][0]:.2f} s vs "
            f"{r['step_seconds_estimated_measured'][1]:.2f} s ({r['step_error_percent']:+.1f} %); matmul "
            f"{r['matmul_gflops_check_after']} GFLOP/s at the check / after the run, load {r['load_average_1min']}"
        )
    return report


if __name__ == "__main__":
    main()
