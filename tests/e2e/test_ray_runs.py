"""``compute: ray`` on a local Ray head (``ray start --head`` on 127.0.0.1 with 2 CPUs), through the
CLI as a user runs it: 2 Ray Train workers train 4 steps of the tiny SmolLM2 (with a storage path:
the files through Ray Train), each step logged once, the adapter in the run folder, the losses
those of torchrun with 2 processes; a cluster without the resources ends the run in error saying
so; an unreachable address is refused at Check; the start-up bench runs (its torchrun run is the
reference the Ray and multi-machine runs are held to).
Skipped where Ray is not installed (``pip install "finetune-studio[ray]"``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REFERENCE_TRAIN, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # one Ray head at a time on this machine
pytest.importorskip("ray")
TRAIN = REFERENCE_TRAIN  # the settings of the torchrun reference run


def _cli(data: Path, datasets_dir: Path, model: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "STUDIO_DATA_DIR": str(data), "STUDIO_ALLOWED_PATHS": f"{datasets_dir},{model.parent}"}
    command = [sys.executable, "-m", "trainer_core", *flags]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def _run_folder(data: Path) -> Path:
    (folder,) = [p for p in (data / "runs").iterdir() if p.is_dir()]
    return folder


def test_two_ray_workers_train_like_two_torchrun_processes(
    ray_head, tmp_path, datasets_dir, tiny_model_dir, torchrun_reference
):
    """The issue's target run through the CLI, with a storage path (``--ray-storage-path``): 2
    workers, 4 steps each logged once, the adapter in the run folder, the losses those of torchrun
    with 2 processes. The studio stages the checked dataset and model in the storage, the workers
    train in scratch folders of their own on those copies and report each checkpoint and the final
    folder through Ray Train, and the run folder gets them (checkpoints with both ranks' parts); the
    run's record keeps the user's paths. The storage's copy is a folder of the run's own, named
    from its job id: a user's folder in the storage named like the run folder (it was
    deleted) is left as it was. (Without a storage path: tests/e2e/test_ray_control.py.)"""
    storage = tmp_path / "storage"
    (storage / "decoyrun" / "sub").mkdir(parents=True)
    (storage / "decoyrun" / "sub" / "notes.txt").write_text("the user's")
    data = tmp_path / "data"
    env = {**os.environ, "STUDIO_DATA_DIR": str(data),
           "STUDIO_ALLOWED_PATHS": f"{datasets_dir},{tiny_model_dir.parent},{storage}"}  # fmt: skip
    dataset = str(datasets_dir / "identity.json")
    flags = ["--dataset", dataset, "--model-name", str(tiny_model_dir), *TRAIN, "--save-steps", "2", "--compute",
             "ray", "--ray-address", ray_head, "--num-workers", "2", "--ray-storage-path", str(storage),
             "--output-dir", str(data / "runs" / "decoyrun")]  # fmt: skip
    run = subprocess.run([sys.executable, "-m", "trainer_core", "train", *flags], env=env, capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    folder = _run_folder(data)
    assert f"output in {folder}" in run.stdout + run.stderr and "studio-ray-" not in run.stdout
    log = (folder / "launcher.log").read_text()
    job_id = json.loads((folder / "run.json").read_text())["job_id"]
    assert re.search(rf"staged the inputs in {re.escape(str(storage))}/studio-{job_id}-[0-9a-f]{{8}}/inputs", log)
    assert f"inputs/model_name/0/{tiny_model_dir.name}" in log  # the workers loaded the staged copy
    assert "copied into the run folder: checkpoint-2, checkpoint-4, final" in log
    assert [p.name for p in storage.iterdir()] == ["decoyrun"]  # the run's copy removed once in the run folder
    assert (storage / "decoyrun" / "sub" / "notes.txt").read_text() == "the user's"  # the user's folder kept
    assert (folder / "adapter_model.safetensors").is_file()
    for step in (2, 4):
        saved = folder / f"checkpoint-{step}"
        assert (saved / "adapter_model.safetensors").is_file() and (saved / "optimizer.pt").is_file()
        assert (saved / "rng_state_0.pth").is_file() and (saved / "rng_state_1.pth").is_file()
    logged = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if m.get("loss") is not None] == [1, 2, 3, 4]  # rank 0 alone reports
    record = json.loads((folder / "run.json").read_text())["request"]
    assert record["local_datasets"] == [dataset] and record["model_name"] == str(tiny_model_dir)
    assert record["compute"] == "ray" and record["num_workers"] == 2
    losses = [m["loss"] for m in logged if m.get("loss") is not None]
    assert len(losses) == len(torchrun_reference) == 4
    for ours, theirs in zip(losses, torchrun_reference):
        assert abs(ours - theirs) <= 0.01, (losses, torchrun_reference)


def test_a_cluster_without_the_resources_ends_the_run_saying_so(ray_head, tmp_path, datasets_dir, tiny_model_dir):
    flags = ["train", "--dataset", str(datasets_dir / "identity.json"), "--model-name", str(tiny_model_dir), *TRAIN]
    found = _cli(tmp_path, datasets_dir, tiny_model_dir, *flags, "--compute", "ray", "--ray-address", ray_head,
                 "--num-workers", "3")  # fmt: skip
    assert found.returncode != 0
    said = found.stdout + found.stderr
    assert "3 workers x 1 CPU need 3 CPU, and the cluster has 2" in said, said[-2000:]


def test_an_unreachable_address_is_refused_at_check(tmp_path, datasets_dir, tiny_model_dir):
    flags = ["check", "--dataset", str(datasets_dir / "identity.json"), "--model-name", str(tiny_model_dir)]
    found = _cli(tmp_path, datasets_dir, tiny_model_dir, *flags, "--compute", "ray", "--ray-address",
                 f"127.0.0.1:{free_port()}")  # fmt: skip
    assert found.returncode != 0
    assert "ray_address: nothing answers at 127.0.0.1:" in found.stdout + found.stderr


def test_the_startup_bench_times_torchrun_and_ray_to_their_first_step(ray_startup_report):
    """``bench/ray_startup.py`` on the test head (the session's run of it, whose torchrun losses are
    the reference of the tests above): one torchrun and one Ray run of 4 steps, both timed to their
    first step, the same losses (figures reported, not asserted)."""
    report = ray_startup_report
    assert [r["how"] for r in report["runs"]] == ["torchrun", "ray"] and report["steps"] == 4
    assert all(r["first_step_seconds"] > 0 and len(r["losses"]) == 4 for r in report["runs"])
    assert report["losses_agree"] and report["first_step_ratio"] > 0
    assert "Start to first step" in report["printed"]
