"""The headless CLI trains the default model on identity.json, and fails loudly on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer_core", "train", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_cli_trains_identity(tmp_path, datasets_dir, model_dir):
    out = tmp_path / "identity-run"
    config = tmp_path / "run.yaml"
    config.write_text("batch_size: 2\nmax_seq_length: 128\nlearning_rate: 0.0005\n")
    result = _cli(
        "--dataset",
        str(datasets_dir / "identity.json"),
        "--config",
        str(config),
        "--max-steps",
        "3",
        "--output-dir",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "completed" in result.stdout
    assert "[loading_model]" in result.stdout and "[training]" in result.stdout  # phases beside the bar
    assert (out / "adapter_model.safetensors").is_file() and (out / "adapter_config.json").is_file()
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3] and steps[0]["learning_rate"] > 0
    assert json.loads((out / "request.json").read_text())["learning_rate"] == 0.0005


def test_cli_rejects_bad_settings_before_starting(tmp_path, datasets_dir):
    result = _cli("--dataset", str(datasets_dir / "identity.json"), "--learning-rate", "3")
    assert result.returncode == 2 and "learning_rate" in result.stderr
