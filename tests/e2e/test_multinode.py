"""torchrun across machines (``num_nodes``, ``node_rank``, ``rdzv_endpoint``), played on this host
by two CLI processes with data folders of their own, as a user runs the CLI on each machine:
machine 0 (rank 0) logs each of 4 steps once and saves the adapter, machine 1 completes saying
machine 0 holds the result; the losses are those of one machine's 2 processes with the same
global batch and seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REFERENCE_TRAIN, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # shares the torchrun reference with the Ray tests
TRAIN = REFERENCE_TRAIN


def _cli(data: Path, datasets_dir: Path, model: Path, *flags: str) -> subprocess.Popen:
    env = {**os.environ, "STUDIO_DATA_DIR": str(data), "STUDIO_ALLOWED_PATHS": f"{datasets_dir},{model.parent}"}
    return subprocess.Popen(
        [sys.executable, "-m", "trainer_core", *flags], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def _losses(data: Path) -> list[float]:
    (folder,) = [p for p in (data / "runs").iterdir() if p.is_dir()]
    return [m["loss"] for m in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines()) if m.get("loss")]


def test_two_machines_train_like_one_machines_two_processes(tmp_path, datasets_dir, tiny_model_dir, torchrun_reference):
    common = ["train", "--dataset", str(datasets_dir / "identity.json"), "--model-name", str(tiny_model_dir), *TRAIN]
    across = [*common, "--num-nodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
    machines = [
        _cli(tmp_path / f"machine{rank}", datasets_dir, tiny_model_dir, *across, "--node-rank", str(rank))
        for rank in (0, 1)
    ]
    said = [proc.communicate(timeout=600)[0] for proc in machines]
    assert [proc.returncode for proc in machines] == [0, 0], said[0][-3000:] + said[1][-3000:]
    (zero,) = (tmp_path / "machine0" / "runs").iterdir()
    assert (zero / "adapter_model.safetensors").is_file()
    logged = [json.loads(line) for line in (zero / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if m.get("loss") is not None] == [1, 2, 3, 4]
    (one,) = (tmp_path / "machine1" / "runs").iterdir()
    assert not (one / "adapter_model.safetensors").exists()
    assert "machine 0 (rank 0) saved the adapter" in said[1], said[1][-2000:]

    losses = _losses(tmp_path / "machine0")
    assert len(losses) == len(torchrun_reference) == 4
    for ours, theirs in zip(losses, torchrun_reference):
        assert abs(ours - theirs) <= 0.01, (losses, torchrun_reference)
