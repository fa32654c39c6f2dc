"""The job queue (trainer_core/queue): order, one job at a time, refused entries skipped, reorder and
remove, persistence across a restart, tokens kept out of the database. Fake workers stand in for
training; the store is the real SQLite file."""

import time

import pytest

from tests.support import fake_workers
from trainer_core.paths import PathNotAllowed
from trainer_core.queue.dispatcher import TOKEN_LOST, JobQueue
from trainer_core.queue.store import QueueState, QueueStore
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest

TOKEN = "hf_QueueTokenNeverStored42"


def _admit(request, settings, store):
    """Admission stand-in: refuses a request whose dataset is named 'gone.json', as the real check
    refuses a file that disappeared after it was queued."""
    if any(p.endswith("gone.json") for p in request.local_datasets):
        raise PathNotAllowed("local_datasets: 'gone.json' does not exist any more: put the file back or remove the job")
    return request


def _request(lr: float, **fields) -> TrainingStartRequest:
    return TrainingStartRequest(
        local_datasets=fields.pop("data", ["rows.json"]),
        max_steps=fields.pop("max_steps", 4),
        learning_rate=lr,
        **fields,
    )


@pytest.fixture
def made(tmp_path):
    """A factory of (runner, queue) over one history file: calling it again is an app restart."""
    made = []

    def make(worker=fake_workers.page_worker, start=True):
        store = RunStore(tmp_path / "history.db")
        runner = JobRunner(worker_target=worker, runs_dir=tmp_path / "runs", store=store, warm_modules=())
        queue = JobQueue(runner, None, QueueStore(tmp_path / "history.db"), admit_fn=_admit)
        made.append((runner, queue))
        return runner, (queue.start() if start else queue)

    yield make
    for runner, queue in made:
        queue.close()
        runner.stop(save=False)
        runner.wait(10)


def _drain(runner: JobRunner, queue: JobQueue, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (
            not any(e.state == QueueState.waiting for e in queue.entries())
            and not runner.status(False).is_training_running
        ):
            time.sleep(0.3)  # the dispatcher may be between two jobs
            if not runner.status(False).is_training_running:
                return
        time.sleep(0.1)
    raise AssertionError("the queue did not drain")


def _runs_oldest_first(runner: JobRunner):
    return list(reversed(runner.store.list_runs()))


def test_three_jobs_run_in_order_one_at_a_time(made):
    runner, queue = made()
    for lr in (1e-4, 2e-4, 3e-4):
        queue.add(_request(lr))
    _drain(runner, queue)
    runs = _runs_oldest_first(runner)
    assert [r.request["learning_rate"] for r in runs] == [1e-4, 2e-4, 3e-4]
    assert all(r.phase.value == "completed" for r in runs)
    for before, after in zip(runs, runs[1:]):
        assert after.created_at >= before.finished_at  # never two at once
        assert after.created_at - before.finished_at < 3.0  # the next starts as soon as the machine is free
    assert queue.entries() == []


def test_start_keeps_its_meaning_and_the_queue_waits_for_the_running_job(made):
    runner, queue = made()
    first = runner.start(_request(1e-4, max_steps=12))  # 12 steps of 0.25 s
    assert first.status == "queued"
    entry = queue.add(_request(2e-4))
    time.sleep(1.0)
    assert queue.entries()[0].state == QueueState.waiting and queue.entries()[0].position == 1
    refused = runner.start(_request(3e-4))
    assert refused.status == "error" and "already in progress" in refused.message  # /start is not a queue
    _drain(runner, queue)
    runs = _runs_oldest_first(runner)
    assert [r.request["learning_rate"] for r in runs] == [1e-4, 2e-4] and runs[1].created_at >= runs[0].finished_at
    assert queue.store.get(entry.queue_id) is None


def test_a_job_refused_at_its_turn_is_kept_with_the_reason_and_the_rest_run(made):
    runner, queue = made()
    runner.start(_request(1e-4, max_steps=8))
    queue.add(_request(2e-4, data=["rows.json"]))
    # queued while its file was there (so straight into the store: the check at add would refuse it now)
    gone = queue.store.add(_request(3e-4, data=["gone.json"]).public_dict(), had_token=False)
    queue.add(_request(4e-4))
    _drain(runner, queue)
    assert [r.request["learning_rate"] for r in _runs_oldest_first(runner)] == [1e-4, 2e-4, 4e-4]
    kept = queue.store.get(gone.queue_id)
    assert kept.state == QueueState.refused and "gone.json" in kept.error and kept.position == 0


def test_a_job_that_fails_does_not_block_the_next(made):
    runner, queue = made(worker=fake_workers.dying_worker)
    queue.add(_request(1e-4))
    queue.add(_request(2e-4))
    _drain(runner, queue)
    runs = _runs_oldest_first(runner)
    assert [r.phase.value for r in runs] == ["error", "error"] and len(runs) == 2


def test_reorder_and_remove_renumber_the_waiting_jobs(made):
    runner, queue = made(start=False)  # no dispatcher: nothing leaves the queue
    ids = [queue.add(_request(lr)).queue_id for lr in (1e-4, 2e-4, 3e-4, 4e-4)]
    assert [e.position for e in queue.entries()] == [1, 2, 3, 4]
    assert queue.move(ids[3], 1).position == 1
    assert [e.queue_id for e in queue.entries()] == [ids[3], ids[0], ids[1], ids[2]]
    assert queue.move(ids[3], 99).position == 4  # past the end: last
    assert queue.remove(ids[0]) and not queue.remove(ids[0]) and not queue.remove("q_1_deadbeef")
    assert [(e.queue_id, e.position) for e in queue.entries()] == [(ids[1], 1), (ids[2], 2), (ids[3], 3)]
    assert queue.move("q_1_deadbeef", 1) is None


def test_the_queue_survives_a_restart_between_two_jobs(made, tmp_path):
    """The app dies after job 1 and before job 2 started: the new process runs jobs 2 and 3."""
    runner, queue = made(start=False)
    for lr in (1e-4, 2e-4, 3e-4):
        queue.add(_request(lr))
    assert queue.dispatch_once().startswith("job_")  # job 1, by hand: no dispatcher thread
    assert runner.wait(30)
    # "kill": the objects are dropped without any clean-up; a new app opens the same file
    runner2, queue2 = made()
    _drain(runner2, queue2)
    runs = _runs_oldest_first(runner2)
    assert [r.request["learning_rate"] for r in runs] == [1e-4, 2e-4, 3e-4]
    assert all(r.phase.value == "completed" for r in runs) and queue2.entries() == []


def test_an_entry_half_started_by_a_dead_app_becomes_interrupted_and_is_not_rerun(made):
    runner, queue = made(start=False)
    entry = queue.add(_request(1e-4))
    later = queue.add(_request(2e-4))
    assert queue.store.claim(entry.queue_id)  # the dead app was handing it over
    runner2, queue2 = made()
    _drain(runner2, queue2)
    assert queue2.store.get(entry.queue_id).state == QueueState.interrupted
    assert [r.request["learning_rate"] for r in _runs_oldest_first(runner2)] == [2e-4]
    assert queue2.store.get(later.queue_id) is None


def test_the_token_stays_in_memory_and_a_restart_says_it_was_lost(made, tmp_path):
    runner, queue = made(start=False)
    entry = queue.add(_request(1e-4, hf_token=TOKEN))
    assert entry.had_token and "hf_token" not in entry.request
    assert {k: v.get_secret_value() for k, v in queue._tokens[entry.queue_id].items()} == {"hf_token": TOKEN}
    for path in tmp_path.glob("history.db*"):
        assert TOKEN.encode() not in path.read_bytes()
    # restart: a refusal of that entry says the token is gone and what to do
    queue.store.remove(entry.queue_id)
    lost = queue.store.add(_request(1e-4, data=["gone.json"]).public_dict(), had_token=True)
    runner2, queue2 = made()
    _drain(runner2, queue2)
    assert TOKEN_LOST in queue2.store.get(lost.queue_id).error


def test_a_full_queue_is_refused(made, monkeypatch):
    from trainer_core.queue import store as queue_store

    monkeypatch.setattr(queue_store, "MAX_ENTRIES", 2)
    runner, queue = made(start=False)
    queue.add(_request(1e-4))
    queue.add(_request(2e-4))
    with pytest.raises(queue_store.QueueFull, match="already holds 2 jobs"):
        queue.add(_request(3e-4))


def test_summary_names_model_data_method_length_and_rate():
    store_entry = {
        "model_name": "/models/SmolLM2-135M-Instruct",
        "local_datasets": ["/d/identity.json"],
        "training_type": "lora",
        "lora_r": 16,
        "max_steps": 0,
        "num_epochs": 3.0,
        "learning_rate": 0.001,
    }
    from trainer_core.queue.store import QueueEntry

    entry = QueueEntry(
        queue_id="q_1_00000000", position=1, created_at=0.0, state=QueueState.waiting, request=store_entry
    )
    assert entry.summary == "SmolLM2-135M-Instruct · identity.json · lora r16 · 3.0 epochs · lr 0.001"
    full = QueueEntry(
        **{
            **entry.model_dump(exclude={"summary"}),
            "request": {**store_entry, "training_type": "full", "max_steps": 60},
        }
    )
    assert full.summary == "SmolLM2-135M-Instruct · identity.json · full · 60 steps · lr 0.001"


def test_an_old_history_file_gains_the_queue_table(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    RunStore(path).close()
    with sqlite3.connect(path) as db:
        assert "queue" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    QueueStore(path).close()
    with sqlite3.connect(path) as db:
        assert "queue" in {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_a_failure_after_the_claim_never_leaves_an_entry_stuck(made, monkeypatch):
    """Break-it finding: an exception in the hand-over (a failed prewarm spawn, a failed start) must
    not leave the entry ``starting`` (unremovable) and block the queue behind it."""
    runner, queue = made(start=False)
    monkeypatch.setattr(runner, "prewarm", lambda: (_ for _ in ()).throw(OSError(24, "Too many open files")))
    real_start, calls = runner.start, []

    def start_once_broken(request):
        calls.append(request.learning_rate)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        return real_start(request)

    monkeypatch.setattr(runner, "start", start_once_broken)
    first, second = queue.add(_request(1e-4)), queue.add(_request(2e-4))
    assert queue.dispatch_once() == "next"  # the first is refused with the reason
    refused = queue.store.get(first.queue_id)
    assert refused.state == QueueState.refused and "No space left on device" in refused.error
    assert queue.dispatch_once().startswith("job_")  # the second starts though prewarm keeps failing
    assert runner.wait(30) and queue.store.get(second.queue_id) is None
    assert queue.remove(first.queue_id) and not queue.store.pending()


def test_an_entry_being_started_cannot_be_removed(made):
    runner, queue = made(start=False)
    entry = queue.add(_request(1e-4))
    assert queue.store.claim(entry.queue_id)
    assert not queue.remove(entry.queue_id) and queue.store.get(entry.queue_id).state == QueueState.starting


def test_names_refuse_invisible_and_control_characters(tmp_path):
    from trainer_core.runs.labels import label_text

    for bad in ("a\u0085b", "\u202eevil", "x\u2028y", "zero\u200bwidth", "bell\x07"):
        with pytest.raises(ValueError, match="control or invisible"):
            label_text("name", bad, 80)
    assert label_text("note", "line one\nline two\ttabbed", 2000) == "line one\nline two\ttabbed"
    assert label_text("name", "  Ünïcode 名前 run  ", 80) == "Ünïcode 名前 run"
