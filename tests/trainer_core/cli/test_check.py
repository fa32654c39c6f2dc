"""``python -m trainer_core check`` as a user runs it (subprocess): exit codes 0 / 1 / 2, ``--json``
keys, no colour when stdout is not a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_core.cli.check import render
from trainer_core.preflight.report import LengthHistogram, PreflightReport, SampleRow, Segment

REPO = Path(__file__).resolve().parents[3]
KEYS = {
    "rows_read",
    "rows_kept",
    "rows_dropped",
    "rows_truncated",
    "rows_truncated_share",
    "tokens_total",
    "tokens_trained",
    "tokens_cut",
    "rows_without_trained_tokens",
    "eval_rows",
    "steps_per_epoch",
    "total_steps",
    "memory_estimate_gib",
    "time_estimate_seconds",
    "warnings",
    "errors",
    "files",
    "samples",
    "histogram",
}


def _check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer_core", "check", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def _alpaca(tmp_path: Path, name: str, rows: list[dict]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(rows))
    return str(path)


@pytest.mark.slow
def test_json_report_and_exit_0(tmp_path):
    data = _alpaca(
        tmp_path, "ok.json", [{"instruction": f"Say {i}.", "input": "", "output": f"{i}!"} for i in range(5)]
    )
    done = _check("--dataset", data, "--batch-size", "2", "--num-epochs", "2", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)  # stdout is the one JSON document
    assert KEYS <= set(report)
    assert (report["rows_read"], report["rows_kept"], report["steps_per_epoch"], report["total_steps"]) == (5, 5, 3, 6)
    assert report["errors"] == [] and report["files"][0]["format"] == "alpaca"


@pytest.mark.slow
def test_errors_exit_1_and_text_has_no_colour_off_a_terminal(tmp_path):
    prompt = "Please read this carefully. " * 30
    data = _alpaca(tmp_path, "masked.json", [{"instruction": prompt, "input": "", "output": "ok"}] * 2)
    done = _check("--dataset", data, "--max-seq-length", "32", env={"NO_COLOR": ""})
    assert done.returncode == 1, done.stderr[-2000:]
    assert "[no_trained_tokens] training would learn nothing" in done.stdout
    assert "\033[" not in done.stdout and "masked.json [train, alpaca]: 2 rows read, 0 kept, 2 dropped" in done.stdout


def test_bad_input_exits_2(tmp_path):
    missing = _check("--dataset", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "not found" in missing.stderr
    invalid = _check("--dataset", str(tmp_path / "nope.json"), "--learning-rate", "5")
    assert invalid.returncode == 2 and "learning_rate" in invalid.stderr


def test_render_colours_trained_and_masked_text():
    sample = SampleRow(
        file="a.json",
        row=1,
        tokens=3,
        trained_tokens=1,
        truncated=False,
        segments=[Segment(text="Q? ", trained=False), Segment(text="A.", trained=True)],
    )
    report = PreflightReport(
        model_name="m",
        tokenizer_found=True,
        max_seq_length=16,
        files=[],
        rows_read=1,
        rows_kept=1,
        rows_dropped=0,
        rows_truncated=0,
        rows_truncated_share=0.0,
        tokens_total=3,
        tokens_trained=1,
        tokens_cut=0,
        rows_without_trained_tokens=0,
        eval_rows=0,
        histogram=LengthHistogram(edges=[0, 8, 16], counts=[0, 1]),
        samples=[sample],
        global_batch_size=1,
        steps_per_epoch=1,
        total_steps=1,
        epochs=1.0,
        warnings=[],
        errors=[],
    )
    coloured, plain = render(report, colour=True), render(report, colour=False)
    assert "\033[2mQ? \033[0m\033[32mA.\033[0m" in coloured
    assert "Q? «A.»" in plain and "\033[" not in plain
    assert "8-16" in plain and "<- max_seq_length" in plain
