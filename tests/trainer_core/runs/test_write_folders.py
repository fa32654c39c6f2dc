"""Every folder a run writes into passes the output-folder rules whichever field names it
(``runs.write_folders``): ``tensorboard_dir`` as an attacker would set it (another run's
checkpoint, the data dir, runs/, uploads/, the allowed root, non-empty datasets/ and models/
folders, an existing file), a tensorboard folder claimed, recorded and deleted with its run, and
the rules of a local ``ray_storage_path``."""

from __future__ import annotations

import json

import pytest

from trainer_core.paths import PathNotAllowed
from trainer_core.runs.ending import settle_files
from trainer_core.runs.folders import MARKER, OutputDirError, claim
from trainer_core.runs.metrics import MetricsHistory
from trainer_core.runs.opening import open_run
from trainer_core.runs.store import RunStore
from trainer_core.runs.write_folders import check_write_folders, delete_run
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings


@pytest.fixture
def studio(tmp_path):
    """(settings, store): a data dir with runs/ and uploads/, an allowed root holding a datasets/
    and a models/ folder, and run job_a (completed) with a checkpoint-1 in the history."""
    allowed = tmp_path / "allowed"
    (allowed / "datasets").mkdir(parents=True)
    (allowed / "datasets" / "a.json").write_text("[]")
    (allowed / "models" / "m").mkdir(parents=True)
    (allowed / "models" / "m" / "config.json").write_text("{}")
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(allowed), models_dir=tmp_path / "models")
    settings.uploads_dir.mkdir(parents=True)
    settings.runs_dir.mkdir()
    store = RunStore(settings.db_path)
    victim = settings.runs_dir / "job_a"
    claim(victim, "job_a")
    (victim / "checkpoint-1").mkdir()
    (victim / "checkpoint-1" / "adapter_model.safetensors").write_bytes(b"w")
    store.create_run("job_a", {"max_steps": 1}, str(victim), "completed")
    yield settings, store
    store.close()


def request(**fields) -> TrainingStartRequest:
    return TrainingStartRequest(local_datasets=["a.json"], **fields)


def test_tensorboard_dir_is_refused_where_output_dir_is(studio, tmp_path):
    settings, store = studio
    allowed = tmp_path / "allowed"
    (allowed / "notes.txt").write_text("a file")
    victim = settings.runs_dir / "job_a"
    for value, words in (
        (victim / "checkpoint-1", "is inside the folder of another run (job_a)"),
        (victim, "already holds files of run job_a"),
        (victim / "checkpoint-1" / "new", "is inside the folder of another run (job_a)"),
        (settings.data_dir, "is the studio's folder"),
        (settings.runs_dir, "is the studio's folder"),
        (settings.uploads_dir, "is inside the uploads folder"),
        (settings.uploads_dir / "tb", "is inside the uploads folder"),
        (allowed, "is the studio's folder"),
        (tmp_path, "outside the allowed folders"),
        (allowed / "datasets", "already holds files"),
        (allowed / "models", "already holds files"),
        (allowed / "notes.txt", "is a file; choose a new or empty folder"),
    ):
        with pytest.raises((OutputDirError, PathNotAllowed)) as refused:
            check_write_folders(request(tensorboard_dir=str(value)), settings, store)
        assert str(refused.value).startswith("tensorboard_dir: ") and words in str(refused.value), (value, refused)
    with pytest.raises(OutputDirError, match="tensorboard_dir: .* holds the run's output_dir"):
        check_write_folders(
            request(output_dir=str(allowed / "x" / "run"), tensorboard_dir=str(allowed / "x")), settings, store
        )
    inside = check_write_folders(
        request(output_dir=str(allowed / "run"), tensorboard_dir=str(allowed / "run" / "tb")), settings, store
    )
    assert inside == {"output_dir": str(allowed / "run"), "tensorboard_dir": str(allowed / "run" / "tb")}
    assert check_write_folders(request(tensorboard_dir=str(allowed / "tb")), settings, store) == {
        "tensorboard_dir": str(allowed / "tb")
    }
    assert not (allowed / "tb").exists()  # a check writes nothing


def test_a_tensorboard_dir_of_its_own_is_claimed_recorded_and_deleted_with_the_run(studio, tmp_path):
    settings, store = studio
    tb = tmp_path / "allowed" / "tb"
    started = request(tensorboard_dir=str(tb))
    opened = open_run(started, store, MetricsHistory(), settings.runs_dir)
    assert json.loads((tb / MARKER).read_text()) == {"job_id": opened.job_id}
    (tb / "events.out.tfevents.1.host").write_bytes(b"e")
    (opened.output_dir / "adapter_model.safetensors").write_bytes(b"w")
    settle_files(str(opened.output_dir), opened.job_id, started)
    assert json.loads((tb / MARKER).read_text())["files"] == ["events.out.tfevents.1.host"]
    run = store.get_run(opened.job_id)
    assert check_write_folders(started, settings, store, resumed=run) == {"tensorboard_dir": str(tb)}  # a resume
    with pytest.raises(OutputDirError, match=f"tensorboard_dir: .* already holds files of run {opened.job_id}"):
        check_write_folders(started, settings, store)  # another run
    with pytest.raises(
        OutputDirError, match=rf"tensorboard_dir: .* inside the folder of another run \({opened.job_id}\)"
    ):
        check_write_folders(request(tensorboard_dir=str(tb / "sub")), settings, store)
    (tb / "mine.txt").write_text("the user's")
    deleted = delete_run(run, settings.allowed_roots, settings.protected_dirs, settings.runs_dir)
    assert deleted.removed == 2 and deleted.refused is None and deleted.kept == [str(tb / "mine.txt")]
    assert sorted(p.name for p in tb.iterdir()) == ["mine.txt"] and not opened.output_dir.exists()


def test_a_start_whose_tensorboard_dir_was_taken_meanwhile_leaves_nothing(studio, tmp_path):
    settings, store = studio
    tb = tmp_path / "allowed" / "tb"
    tb.mkdir()
    (tb / "late.txt").write_text("another writer came first")
    out = tmp_path / "allowed" / "out"
    with pytest.raises(OutputDirError, match="tensorboard_dir: .* already holds files"):
        open_run(request(output_dir=str(out), tensorboard_dir=str(tb)), store, MetricsHistory(), settings.runs_dir)
    assert not out.exists() and sorted(p.name for p in tb.iterdir()) == ["late.txt"]
    assert [run.job_id for run in store.list_runs()] == ["job_a"]


def test_a_ray_storage_folder_is_shared_but_never_a_studio_folder_or_inside_a_run(studio, tmp_path):
    settings, store = studio
    allowed = tmp_path / "allowed"
    ray = {"compute": "ray", "ray_address": "127.0.0.1:6379"}
    for value, words in (
        (settings.runs_dir, "is the studio's folder"),
        (settings.data_dir, "is the studio's folder"),
        (settings.uploads_dir / "s", "is inside the uploads folder"),
        (settings.runs_dir / "job_a", "inside the folder of another run (job_a)"),
        (settings.runs_dir / "job_a" / "checkpoint-1", "inside the folder of another run (job_a)"),
        (tmp_path, "outside the allowed folders"),
        (allowed / "datasets" / "a.json", "is a file"),
    ):
        with pytest.raises((OutputDirError, PathNotAllowed)) as refused:
            check_write_folders(request(**ray, ray_storage_path=str(value)), settings, store)
        assert str(refused.value).startswith("ray_storage_path: ") and words in str(refused.value), (value, refused)
    for shared in (allowed, allowed / "datasets", settings.data_dir / "ray-storage"):  # may hold files
        assert check_write_folders(request(**ray, ray_storage_path=str(shared)), settings, store) == {
            "ray_storage_path": str(shared)
        }
    assert check_write_folders(request(**ray, ray_storage_path="s3://bucket/runs"), settings, store) == {}
