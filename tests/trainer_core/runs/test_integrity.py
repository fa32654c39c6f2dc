"""A damaged studio.db: start-up names the file, leaves it untouched and says how
to recover; moved aside, the runs come back from their run folders (start-up and the CLI)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest

from trainer_core.runs.integrity import HistoryUnreadable
from trainer_core.runs.store import RunStore
from trainer_core.settings import Settings, get_settings


@pytest.fixture(autouse=True)
def _settings_from_this_tests_environment():
    """``get_settings`` reads the environment once a process: again for each test here."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy_of(run, tmp_path):
    """A data dir holding a copy of the trained run's folder and of its history."""
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=run.settings.allowed_paths)
    shutil.copytree(run.output_dir, settings.runs_dir / run.job_id, symlinks=True)
    source = sqlite3.connect(run.db_path)
    with sqlite3.connect(settings.db_path) as copy:  # a consistent copy of a WAL database
        source.backup(copy)
    source.close()
    return settings


def _damage_a_page(path):
    """Overwrite the middle pages of a real history with zeros (the header stays: SQLite opens it)."""
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) >= 4 * page
    data[2 * page : len(data) - page] = bytes(len(data) - 3 * page)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["not_a_database", "damaged_pages"])
def test_a_damaged_history_stops_start_up_naming_the_file_and_leaves_it_untouched(
    tiny_trained_run, tmp_path, monkeypatch, damage
):
    settings = _copy_of(tiny_trained_run, tmp_path)
    db = settings.db_path
    if damage == "not_a_database":
        db.write_bytes(b"this is not SQLite " * 300)
    else:
        _damage_a_page(db)
    before = _sha(db)
    monkeypatch.setenv("STUDIO_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", settings.allowed_paths)
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    import server

    with pytest.raises(SystemExit) as ended:
        server.main(["--port", "7999"])  # the launcher's own start-up: python app.py
    message = str(ended.value.code)
    assert message.startswith("error: The run history " + str(db))
    assert "left untouched" in message and f"mv {db} {db}.broken" in message and "import-runs" in message
    assert "Traceback" not in message
    assert _sha(db) == before and db.exists()
    assert not db.with_name(db.name + "-wal").exists() or damage == "damaged_pages"
    with pytest.raises(HistoryUnreadable):  # every opener refuses it the same way
        RunStore(db)
    assert _sha(db) == before


def test_moved_aside_the_runs_come_back_from_their_folders(tiny_trained_run, tmp_path):
    from fastapi.testclient import TestClient

    from server import build_app

    settings = _copy_of(tiny_trained_run, tmp_path)
    original = RunStore(tiny_trained_run.db_path)
    want = original.get_run(tiny_trained_run.job_id)
    original.close()
    settings.db_path.write_bytes(b"\x00" * 8192)  # damaged, then moved aside as the message says
    settings.db_path.rename(settings.db_path.with_name("studio.db.broken"))

    with TestClient(build_app(settings)) as client:
        runs = client.get("/api/train/runs").json()
        assert [r["job_id"] for r in runs] == [tiny_trained_run.job_id]
        got = client.get(f"/api/train/runs/{tiny_trained_run.job_id}").json()
    assert got["phase"] == "completed" and got["end_reason"] == "completed"
    assert got["output_dir"] == str(settings.runs_dir / tiny_trained_run.job_id)
    assert got["last_checkpoint"].endswith("checkpoint-3")
    assert got["request"]["model_name"] == want.request["model_name"]
    # run.json keeps when training began and ended (to the second), inside the history's own span
    assert want.created_at - 1 <= got["created_at"] <= got["finished_at"] <= want.finished_at + 1
    assert [(m["step"], m["loss"]) for m in got["metrics"]] == [(m.step, m.loss) for m in want.metrics]
    assert got["final_loss"] == pytest.approx(want.final_loss)


def test_the_cli_re_imports_checks_its_folders_and_keeps_known_runs(tiny_trained_run, tmp_path, monkeypatch, capsys):
    from trainer_core.cli.main import main

    settings = _copy_of(tiny_trained_run, tmp_path)
    settings.db_path.unlink()
    broken = settings.runs_dir / "broken-run"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    monkeypatch.setenv("STUDIO_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", settings.allowed_paths)

    assert main(["import-runs", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["imported"] == [tiny_trained_run.job_id] and first["known"] == []
    assert [folder for folder, _ in first["skipped"]] == [str(broken)]
    assert main(["import-runs", "--json", str(settings.runs_dir / tiny_trained_run.job_id)]) == 0
    assert json.loads(capsys.readouterr().out)["known"] == [tiny_trained_run.job_id]

    assert main(["import-runs", "/etc"]) == 2  # outside the runs folder and the allowed folders
    assert "FOLDER: /etc is outside the allowed folders" in capsys.readouterr().err
    settings.db_path.write_bytes(b"garbage" * 1000)
    for path in settings.db_path.parent.glob("studio.db-*"):
        path.unlink()
    assert main(["import-runs"]) == 1
    assert "cannot be read" in capsys.readouterr().err


def _variant(settings, source, job_id, **changes):
    """A copy of the run folder ``source`` as run ``job_id`` with ``changes`` in its run.json."""
    folder = settings.runs_dir / job_id.encode("utf-8", "surrogatepass").hex()[:40]
    shutil.copytree(source, folder, symlinks=True)
    data = json.loads((folder / "run.json").read_text())
    data.update(job_id=job_id, **changes)
    (folder / "run.json").write_text(json.dumps(data))
    return folder


def test_bad_run_folders_are_skipped_whole_and_the_others_imported(tiny_trained_run, tmp_path):
    from server import open_history

    settings = _copy_of(tiny_trained_run, tmp_path)
    settings.db_path.write_bytes(b"")  # what a failed write leaves: a new history, so a re-import
    good = settings.runs_dir / tiny_trained_run.job_id
    _variant(settings, good, "bad_reason", end_reason=["x"])
    _variant(settings, good, "bad_metrics", best_checkpoint="x", final_metrics=[1])
    _variant(settings, good, "bad\ud800id")
    huge = _variant(settings, good, "huge_step")
    with (huge / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"job_id": "x", "step": 10**30, "total_steps": 3, "loss": 1.0}) + "\n")
    _variant(settings, good, "zz_after_the_bad_ones")

    store = open_history(settings)  # start-up: never stopped by a bad folder
    runs = {r.job_id: r for r in store.list_runs()}
    assert set(runs) == {tiny_trained_run.job_id, "huge_step", "zz_after_the_bad_ones"}
    assert all(r.phase == "completed" for r in runs.values())  # none left half imported as "training"
    huge_steps = [m.step for m in store.get_run("huge_step").metrics]
    assert max(huge_steps) == 3  # the line SQLite cannot hold was left out, the rest kept
    store.close()


def test_another_programs_database_and_a_locked_one_are_refused_and_left_as_they_were(tmp_path):
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (x)")
    before = _sha(foreign)
    with pytest.raises(HistoryUnreadable, match="another program"):
        RunStore(foreign)
    other_runs = tmp_path / "other-runs.db"
    with sqlite3.connect(other_runs) as db:
        db.execute("CREATE TABLE runs (x)")
    with pytest.raises(HistoryUnreadable, match="runs table lacks"):
        RunStore(other_runs)
    assert _sha(foreign) == before

    healthy = tmp_path / "studio.db"
    RunStore(healthy).close()
    holder = sqlite3.connect(healthy, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(HistoryUnreadable) as locked:
            RunStore(healthy)
        assert locked.value.busy and "in use by another program" in str(locked.value)
        assert "move the file aside" not in str(locked.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
