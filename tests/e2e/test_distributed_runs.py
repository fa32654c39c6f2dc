"""Two training processes on this CPU (torchrun, gloo, one thread each) with the tiny SmolLM2:
through the page's Start the loss matches one process with the same global batch and seed; over
HTTP, Stop saves one checkpoint that both processes wrote and Resume continues it, a killed process
ends the run in error naming its rank, and Cancel ends every process of the next run within 2 s."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import httpx
import psutil
import pytest

from tests.e2e.conftest import form_args, statuses
from tests.support.api_server import API_AUTH as AUTH
from tests.support.api_server import app_for
from tests.support.train_api import cancel_ends, kill_rank_1, start_job, wait_end, wait_step
from trainer_core.vocabulary import Phase

pytestmark = pytest.mark.slow
PAGE = dict(max_seq_length=128, max_steps=20, learning_rate=1e-3, lr_scheduler_type="linear", random_seed=7)


def _logged(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def _last5(path: Path) -> tuple[list[int], float]:
    logged = _logged(path)
    return [m["step"] for m in logged], statistics.mean(m["loss"] for m in logged[-5:])


def test_two_processes_from_the_page_reach_the_loss_of_one(client, app_server, datasets_dir, tiny_model_dir):
    """Same data, seed and global batch (one process x 4 rows, two x 2): the mean of the last 5 of
    20 losses agrees within 0.05; only rank 0 reports and writes (one metrics line per step)."""
    runner, _ = app_server
    alpaca = str(datasets_dir / "alpaca_en_demo.json")
    page = dict(PAGE, model_name=str(tiny_model_dir))
    one = list(statuses(client.submit(*form_args(alpaca, batch_size=4, **page), api_name="/start")))[-1]
    assert one["phase"] == Phase.completed.value, one["error"]
    two_updates = list(
        statuses(client.submit(*form_args(alpaca, batch_size=2, num_processes=2, **page), api_name="/start"))
    )
    two = two_updates[-1]
    assert two["phase"] == Phase.completed.value, two["error"]
    details = two["details"]
    assert details["num_processes"] == 2 and details["global_batch_size"] == 4 and len(details["rank_pids"]) == 2
    assert details["total_steps"] == 20
    one_steps, one_loss = _last5(Path(one["details"]["output_dir"]))
    two_steps, two_loss = _last5(Path(details["output_dir"]))
    assert one_steps == two_steps == list(range(1, 21))  # rank 0 alone writes: each step once
    assert abs(one_loss - two_loss) <= 0.05, (one_loss, two_loss)
    tokens = [[m["num_tokens"] for m in _logged(Path(run["details"]["output_dir"]))] for run in (one, two)]
    assert tokens[0] == tokens[1]  # the group's tokens (all processes), the same rows per step
    assert runner.status().metric_history.steps == list(range(1, 21))
    run_dir = Path(details["output_dir"])
    assert (run_dir / "launcher.log").is_file() and (run_dir / "adapter_model.safetensors").is_file()
    assert "rank 1" in (run_dir / "launcher.log").read_text()  # rank 1 logs to the launcher's log, not the run's files
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".partial")]


@pytest.fixture(scope="module")
def app_proc(api_app):
    """The launched app the HTTP tests share (``api_app``; each test waits for its run's end)."""
    return app_for(api_app, "distributed")


def _body(datasets_dir: Path, model: Path, **fields) -> dict:
    return {
        "model_name": str(model),
        "local_datasets": [str(datasets_dir / "alpaca_en_demo.json")],
        "batch_size": 2,
        "num_processes": 2,
        "max_seq_length": 96,
        "max_steps": 2000,
        **fields,
    }


def test_stop_saves_once_for_both_processes_and_resume_continues(app_proc, datasets_dir, tiny_model_dir):
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    job = start_job(api, _body(datasets_dir, tiny_model_dir, max_steps=24))
    wait_step(api, 3)
    assert api.post("/api/train/stop", json={"save": True}).status_code == 200
    stopped = wait_end(api)
    assert stopped["phase"] == "stopped" and stopped["details"]["end_reason"] == "stopped", stopped["error"]
    run_dir = Path(stopped["details"]["output_dir"])
    checkpoints = sorted(p.name for p in run_dir.glob("checkpoint-*"))
    step = stopped["details"]["step"]
    assert checkpoints == [f"checkpoint-{step}"]  # saved once, at the step both processes reached
    saved = run_dir / checkpoints[0]
    assert (saved / "rng_state_0.pth").is_file() and (saved / "rng_state_1.pth").is_file()  # both processes' parts
    assert (saved / "adapter_model.safetensors").is_file() and (saved / "optimizer.pt").is_file()

    assert start_job(api, _body(datasets_dir, tiny_model_dir, max_steps=24, resume_from_checkpoint=str(saved))) == job
    resumed = wait_end(api)
    assert resumed["phase"] == "completed", resumed["error"]
    steps, _ = _last5(run_dir)
    assert steps == list(range(1, 25)) and resumed["metric_history"]["steps"] == list(range(1, 25))


def test_a_killed_process_ends_the_run_in_error_and_cancel_ends_the_next_within_two_seconds(
    app_proc, datasets_dir, tiny_model_dir
):
    """A killed rank ends its run in error naming the rank, and the others with it; the app goes
    on: the next run starts, and Cancel ends every process of it (both ranks and torchrun) within
    2 s."""
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    start_job(api, _body(datasets_dir, tiny_model_dir))
    rank1, ended = kill_rank_1(api, at_step=2)
    assert f"rank 1 (of 2, pid {rank1}) was killed (signal 9)" in ended["error"], ended["error"]

    start_job(api, _body(datasets_dir, tiny_model_dir))  # the app goes on
    status = wait_step(api, 1)
    processes = [psutil.Process(pid) for pid in status["details"]["rank_pids"]]
    launcher = [
        p for p in psutil.Process(app_proc.process.pid).children() if "torch.distributed.run" in " ".join(p.cmdline())
    ]
    assert len(processes) == 2 and len(launcher) == 1
    cancel_ends(api, processes + launcher, within_s=2.0)
