"""Run history: records, metrics, interrupted runs, reopen for resume, delete; WAL on disk."""

import sqlite3

from trainer_core.schemas import Phase, TrainingProgress
from trainer_core.runs.store import RunStore


def _progress(job_id, step, loss=1.0):
    return TrainingProgress(job_id=job_id, step=step, total_steps=10, loss=loss, learning_rate=1e-4)


def test_run_lifecycle_and_reads(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    store.create_run("job_a", {"max_steps": 10}, "/runs/a", "loading_model")
    store.create_run("job_b", {"max_steps": 5}, "/runs/b", "loading_model")
    for step in (1, 2, 3):
        store.add_metric(_progress("job_a", step, loss=1.0 / step))
    store.add_metric(TrainingProgress(job_id="job_a", step=3, total_steps=10, eval_loss=0.7))
    store.finish_run("job_a", "stopped", None, "/runs/a/checkpoint-3")
    runs = store.list_runs()
    assert [r.job_id for r in runs] == ["job_b", "job_a"]  # newest first
    run = store.get_run("job_a")
    assert run.phase == Phase.stopped and run.last_step == 3 and run.total_steps == 10
    assert run.final_loss == 1.0 / 3 and run.last_checkpoint == "/runs/a/checkpoint-3"
    assert [(m.step, m.eval_loss) for m in run.metrics] == [(1, None), (2, None), (3, None), (3, 0.7)]
    assert run.duration_seconds >= 0 and store.get_run("nope") is None
    assert store.find_by_output_dir("/runs/a").job_id == "job_a"


def test_interrupted_and_reopen(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    store.create_run("job_a", {}, "/runs/a", "training")
    for step in range(1, 6):
        store.add_metric(_progress("job_a", step))
    store.close()
    store = RunStore(tmp_path / "studio.db")  # a new process
    marked = store.mark_interrupted()
    assert [r.job_id for r in marked] == ["job_a"]
    run = store.get_run("job_a")
    assert run.phase == Phase.interrupted and "stopped" in run.error and len(run.metrics) == 5
    store.reopen_run("job_a", {"resume": True}, "loading_model", from_step=2)
    run = store.get_run("job_a")
    assert run.phase == Phase.loading_model and run.error is None and run.finished_at is None
    assert [m.step for m in run.metrics] == [1, 2] and run.request == {"resume": True}
    assert store.delete_run("job_a") and store.get_run("job_a") is None
    assert not store.delete_run("job_a")


def test_wal_mode_on_disk(tmp_path):
    RunStore(tmp_path / "studio.db")
    assert sqlite3.connect(tmp_path / "studio.db").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
