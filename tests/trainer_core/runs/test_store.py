"""Run history: records, metrics, interrupted runs, reopen for resume, delete; WAL on disk."""

import sqlite3

from trainer_core.runs.store import RunStore
from trainer_core.status import TrainingProgress
from trainer_core.vocabulary import Phase


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


OLD_SCHEMA = """
CREATE TABLE runs (job_id TEXT PRIMARY KEY, created_at REAL NOT NULL, finished_at REAL, phase TEXT NOT NULL,
    request_json TEXT NOT NULL, output_dir TEXT NOT NULL, last_checkpoint TEXT, final_loss REAL, total_steps INTEGER,
    last_step INTEGER NOT NULL DEFAULT 0, error TEXT);
CREATE TABLE metrics (job_id TEXT NOT NULL REFERENCES runs(job_id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    step INTEGER NOT NULL, progress_json TEXT NOT NULL, PRIMARY KEY (job_id, seq));
INSERT INTO runs (job_id, created_at, finished_at, phase, request_json, output_dir)
    VALUES ('job_old', 100.0, 160.0, 'stopped', '{}', '/runs/old');
"""


def test_an_old_database_opens_and_gets_the_new_columns(tmp_path):
    db = sqlite3.connect(tmp_path / "studio.db")
    db.executescript(OLD_SCHEMA)
    db.close()
    store = RunStore(tmp_path / "studio.db")
    columns = {row[1] for row in sqlite3.connect(tmp_path / "studio.db").execute("PRAGMA table_info(runs)")}
    assert {"training_seconds", "tokens_per_second", "end_reason"} <= columns
    (old,) = store.list_runs()
    assert (old.end_reason, old.training_seconds, old.tokens_per_second) == (None, None, None)
    assert old.wall_seconds == old.duration_seconds == 60.0
    store.close()
    RunStore(tmp_path / "studio.db").close()  # opening again (columns present) is fine
    store = RunStore(tmp_path / "studio.db")
    store.create_run("job_new", {}, "/runs/new", "training")
    store.finish_run("job_new", "stopped", None, None, "cancelled")
    assert store.get_run("job_new").end_reason == "cancelled"


def test_training_seconds_and_tokens_per_second_follow_train_events(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    store.create_run("job_a", {}, "/runs/a", "training")
    assert store.get_run("job_a").training_seconds is None and store.get_run("job_a").wall_seconds is None
    for step in (1, 2, 3):
        store.add_metric(
            TrainingProgress(
                job_id="job_a", step=step, total_steps=10, loss=1.0, elapsed_seconds=2.0 * step, num_tokens=100 * step
            )
        )
    store.add_metric(TrainingProgress(job_id="job_a", step=3, total_steps=10, eval_loss=0.5, elapsed_seconds=9.0))
    run = store.get_run("job_a")
    assert run.training_seconds == 6.0 and run.tokens_per_second == 50.0  # the eval event changes neither
    store.finish_run("job_a", "stopped", None, None, "stopped")
    store.reopen_run("job_a", {}, "loading_model", from_step=1)  # a resume from checkpoint-1
    run = store.get_run("job_a")
    assert (run.training_seconds, run.tokens_per_second, run.end_reason, run.final_loss) == (2.0, 50.0, None, 1.0)
    store._write("UPDATE runs SET created_at = created_at - 1000 WHERE job_id = 'job_a'")  # created long ago
    store.add_metric(TrainingProgress(job_id="job_a", step=2, total_steps=10, loss=0.9, elapsed_seconds=4.5))
    store.finish_run("job_a", "completed", None, None, "completed")
    run = store.get_run("job_a")
    assert run.training_seconds == 4.5 and run.tokens_per_second is None  # no token count in the last event
    assert run.wall_seconds >= 1000 and run.model_dump()["wall_seconds"] == run.wall_seconds  # the API sees it


def test_interrupted_runs_get_their_end_reason(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    store.create_run("job_a", {}, "/runs/a", "training")
    store.create_run("job_b", {}, "/runs/b", "training")
    store.finish_run("job_b", "completed", None, None, "completed")
    store.mark_interrupted()
    assert store.get_run("job_a").end_reason == "interrupted" and store.get_run("job_b").end_reason == "completed"


def _packs(path):
    """job id -> packed event count in table ``series``, read from another connection."""
    return dict(sqlite3.connect(path).execute("SELECT job_id, n FROM series").fetchall())


def test_finished_runs_keep_a_packed_series_that_follows_changes(tmp_path):
    path = tmp_path / "studio.db"
    store = RunStore(path)
    store.create_run("job_a", {}, "/runs/a", "training")
    for step in (1, 2, 3):
        store.add_metric(_progress("job_a", step, loss=1.0 / step))
    assert _packs(path) == {} and store.packed_series("job_a") is None  # live: no pack
    store.finish_run("job_a", "stopped", None, "/runs/a/checkpoint-3")
    assert _packs(path) == {"job_a": 3}  # packed when it ended
    assert store.packed_series("job_a").rows() == store.loss_rows("job_a")
    store.add_metric(TrainingProgress(job_id="job_a", step=3, total_steps=10, eval_loss=0.7))  # after the finish
    assert _packs(path) == {}
    assert store.packed_series("job_a").rows() == store.loss_rows("job_a") and _packs(path) == {"job_a": 4}  # repacked
    store.reopen_run("job_a", {}, "loading_model", from_step=1)  # resume: live again
    assert _packs(path) == {} and store.packed_series("job_a") is None
    store.add_metric(_progress("job_a", 2, loss=0.4))
    store.finish_run("job_a", "completed", None, None, "completed")
    assert [r[:2] for r in store.packed_series("job_a").rows()] == [(1, 1.0), (2, 0.4)]
    assert store.delete_run("job_a") and _packs(path) == {}  # deleted with its run
    assert store.packed_series("job_nope") is None


def test_runs_finished_before_packs_are_packed_on_first_read(tmp_path):
    path = tmp_path / "studio.db"
    store = RunStore(path)
    store.create_run("job_a", {}, "/runs/a", "training")
    store.add_metric(_progress("job_a", 1, loss=0.5))
    store.finish_run("job_a", "completed", None, None, "completed")
    store.create_run("job_b", {}, "/runs/b", "training")
    store.finish_run("job_b", "completed", None, None, "completed")  # no events: an empty pack
    with sqlite3.connect(path) as other:  # as an older version left it; and a pack of another layout
        other.execute("DELETE FROM series WHERE job_id = 'job_a'")
        other.execute("UPDATE series SET version = -1, steps = x'' WHERE job_id = 'job_b'")
    store.close()
    store = RunStore(path)
    assert store.packed_series("job_a").rows() == [(1, 0.5, None, None)] and _packs(path) == {"job_a": 1, "job_b": 0}
    assert store.packed_series("job_b").rows() == []
