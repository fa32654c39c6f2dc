"""The history's list queries: the indexes exist (also in a file made before them) and the hot
queries use them; pages are the right slices of the newest-first order with the right totals,
filtered or not; the pickers' lean labels; ``RunStore.changes`` moves on every write."""

import sqlite3

import pytest

from trainer_core.runs import listing
from trainer_core.runs.store import RunStore

# the runs table as the first release wrote it: no name, note or end_reason columns, no indexes
FIRST_RUNS_TABLE = """
CREATE TABLE runs (
    job_id TEXT PRIMARY KEY, created_at REAL NOT NULL, finished_at REAL, phase TEXT NOT NULL,
    request_json TEXT NOT NULL, output_dir TEXT NOT NULL, last_checkpoint TEXT, final_loss REAL,
    total_steps INTEGER, last_step INTEGER NOT NULL DEFAULT 0, error TEXT
);
"""
INDEXES = {"runs_by_created", "runs_by_output_dir", "runs_by_phase"}


def _plan(store: RunStore, sql: str, args: tuple = ()) -> str:
    return " | ".join(row[3] for row in store._db.execute(f"EXPLAIN QUERY PLAN {sql}", args))


@pytest.fixture
def store(tmp_path):
    """Seven runs job_0 .. job_6 created one second apart (job_6 newest), job_3 and job_4 at the
    same second; the odd ones failed on data/alpaca.json, the even ones completed on org/chat."""
    store = RunStore(tmp_path / "studio.db")
    for i in range(7):
        request = {"local_datasets": ["/data/alpaca.json"]} if i % 2 else {"hf_dataset": "org/chat"}
        created = 1003.0 if i == 4 else 1000.0 + i
        store.create_run(f"job_{i}", request, f"/runs/{i}", "training", created_at=created)
        store.finish_run(f"job_{i}", "error" if i % 2 else "completed", None, None)
    store.set_label("job_2", name="Baseline")
    return store


def test_the_indexes_exist_and_the_hot_queries_use_them(store):
    names = {row[0] for row in store._db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert INDEXES <= names
    page = _plan(store, f"SELECT * FROM runs {listing.NEWEST_FIRST} LIMIT 50 OFFSET 0")
    assert "USING INDEX runs_by_created" in page and "TEMP B-TREE" not in page  # no sort of the whole table
    filtered = _plan(store, f"SELECT {listing._PLAIN}, NULL FROM runs {listing.NEWEST_FIRST}")
    assert "USING COVERING INDEX runs_by_created" in filtered  # the name / status filters read no run row
    labels = _plan(store, f"SELECT job_id, name FROM runs {listing.NEWEST_FIRST} LIMIT 5")
    assert "COVERING INDEX runs_by_created" in labels
    by_folder = _plan(store, "SELECT * FROM runs WHERE output_dir = ? ORDER BY created_at DESC LIMIT 1", ("/r",))
    assert "USING INDEX runs_by_output_dir" in by_folder and "TEMP B-TREE" not in by_folder


def test_a_file_made_before_the_indexes_gains_them_on_open(tmp_path):
    db = sqlite3.connect(tmp_path / "studio.db")
    db.executescript(FIRST_RUNS_TABLE)
    db.execute(
        "INSERT INTO runs (job_id, created_at, phase, request_json, output_dir) "
        "VALUES ('job_old', 1, 'completed', '{}', '/r')"
    )
    db.commit()
    db.close()
    store = RunStore(tmp_path / "studio.db")
    names = {row[0] for row in store._db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert INDEXES <= names
    assert store.runs_page(10, name="old") == ([store.get_record("job_old")], 1)


def test_pages_are_slices_of_the_newest_first_order_with_the_total(store):
    ids = lambda runs: [r.job_id for r in runs]  # noqa: E731
    every = ids(store.list_runs())
    assert every == ["job_6", "job_5", "job_4", "job_3", "job_2", "job_1", "job_0"]  # tie: the larger job id first
    pages = [store.runs_page(limit=3, offset=offset) for offset in (0, 3, 6, 9)]
    assert [ids(runs) for runs, _ in pages] == [every[0:3], every[3:6], every[6:], []]
    assert {total for _, total in pages} == {7}
    assert ids(store.list_runs(limit=2, offset=1)) == every[1:3]
    assert store.runs_page(limit=0) == ([], 7)  # the total alone


def test_filtered_pages_count_only_the_matches(store):
    ids = lambda page: ([r.job_id for r in page[0]], page[1])  # noqa: E731
    assert ids(store.runs_page(limit=2, status="error")) == (["job_5", "job_3"], 3)
    assert ids(store.runs_page(limit=2, offset=2, status="error")) == (["job_1"], 3)
    assert ids(store.runs_page(limit=5, dataset="ORG/")) == (["job_6", "job_4", "job_2", "job_0"], 4)
    assert ids(store.runs_page(limit=5, name="baseline", dataset="chat")) == (["job_2"], 1)
    assert ids(store.runs_page(limit=5, name="JOB_1")) == (["job_1"], 1)
    assert ids(store.runs_page(limit=5, offset=1, name="job_1")) == ([], 1)
    assert ids(store.runs_page(limit=5, status="completed", dataset="alpaca")) == ([], 0)


def test_a_negative_limit_or_offset_is_refused(store):
    for limit, offset in ((-1, 0), (1, -1)):
        with pytest.raises(ValueError, match="limit and offset must be >= 0"):
            store.runs_page(limit=limit, offset=offset)


def test_labels_are_the_newest_runs_job_ids_and_names(store):
    assert store.run_labels(3) == [("job_6", None), ("job_5", None), ("job_4", None)]
    assert ("job_2", "Baseline") in store.run_labels(10)


def test_changes_moves_on_every_write_here_or_from_another_connection(store, tmp_path):
    before = store.changes()
    assert store.changes() == before  # reads change nothing
    store.set_label("job_1", note="checked")
    after_label = store.changes()
    assert after_label != before
    other = sqlite3.connect(tmp_path / "studio.db")
    other.execute("UPDATE runs SET name = 'from elsewhere' WHERE job_id = 'job_0'")
    other.commit()
    other.close()
    assert store.changes() != after_label


def test_every_runs_folders_come_with_the_settings_asked_for(store):
    store.create_run("job_tb", {"tensorboard_dir": "/tb/one", "lora_r": 8}, "/runs/tb", "training", created_at=2000.0)
    found = {row[0]: row[1:] for row in store.run_folders(("tensorboard_dir", "lora_r"))}
    assert (
        len(found) == 8 and found["job_tb"] == ("/runs/tb", "/tb/one", 8) and found["job_0"] == ("/runs/0", None, None)
    )
    assert {len(row) for row in store.run_folders()} == {2}
