"""Output folders: which a run may use, the claim it leaves, and deleting exactly what it wrote."""

import json

import pytest

from trainer_core.runs.folders import MARKER, OutputDirError, check_output_dir, claim, delete_run_files, record_files


@pytest.fixture
def studio(tmp_path):
    data = tmp_path / "data"
    (data / "uploads").mkdir(parents=True)
    (data / "runs").mkdir()
    (data / "studio.db").write_text("db")
    return data, [data], [data, data / "uploads", data / "runs"]


def test_studio_folders_and_their_parents_are_refused(studio, tmp_path):
    data, roots, protected = studio
    for folder in (data, data / "uploads", data / "runs"):
        with pytest.raises(OutputDirError, match="output_dir: .* is the studio's folder"):
            check_output_dir(str(folder), roots, protected, [])
    with pytest.raises(OutputDirError, match="contains the studio's folder"):
        check_output_dir(str(tmp_path), [tmp_path], protected, [])
    assert check_output_dir(str(data / "new"), roots, protected, []) == (data / "new").resolve()


def test_a_folder_with_files_or_inside_another_run_is_refused(studio):
    data, roots, protected = studio
    claim(data / "a", "job_a")
    with pytest.raises(OutputDirError, match="already holds files of run job_a"):
        check_output_dir(str(data / "a"), roots, protected, [("job_a", str(data / "a"))])
    with pytest.raises(OutputDirError, match=r"inside the folder of another run \(job_a\)"):
        check_output_dir(str(data / "a" / "sub"), roots, protected, [("job_a", str(data / "a"))])
    (data / "empty").mkdir()
    assert check_output_dir(str(data / "empty"), roots, protected, []) == (data / "empty").resolve()
    with pytest.raises(OutputDirError, match="already holds files"):
        claim(data / "a", "job_b")


def test_delete_removes_only_recorded_files(studio):
    data, roots, protected = studio
    folder = data / "runs" / "job_a"
    claim(folder, "job_a")
    (folder / "checkpoint-2").mkdir()
    (folder / "checkpoint-2" / "trainer_state.json").write_text("{}")
    (folder / "adapter_model.safetensors").write_bytes(b"x")
    assert record_files(folder, "job_a") == 2
    assert json.loads((folder / MARKER).read_text())["files"] == [
        "adapter_model.safetensors",
        "checkpoint-2/trainer_state.json",
    ]
    (folder / "mine.txt").write_text("user's")
    (folder / "checkpoint-2" / "extra.txt").write_text("user's")
    result = delete_run_files(str(folder), "job_a", roots, protected, data / "runs" / "job_a")
    assert result.removed == 2 and result.kept == ["checkpoint-2/extra.txt", "mine.txt"] and result.refused is None
    assert sorted(p.name for p in folder.rglob("*")) == ["checkpoint-2", "extra.txt", "mine.txt"]


def test_delete_refuses_studio_folders_foreign_folders_and_outside(studio, tmp_path):
    data, roots, protected = studio
    for folder in (data, data / "uploads"):
        assert (
            "studio's folder"
            in delete_run_files(str(folder), "job_x", roots, protected, data / "runs" / "job_x").refused
        )
    claim(data / "b", "job_b")
    assert (
        "not created by this run"
        in delete_run_files(str(data / "b"), "job_x", roots, protected, data / "runs" / "job_x").refused
    )
    (tmp_path / "outside").mkdir()
    assert (
        "outside the allowed folders"
        in delete_run_files(str(tmp_path / "outside"), "job_x", roots, protected, data / "runs" / "job_x").refused
    )
    assert (data / "studio.db").is_file() and (data / "b" / MARKER).is_file()


def test_a_legacy_default_folder_is_deleted_whole(studio):
    data, roots, protected = studio
    folder = data / "runs" / "job_old"
    folder.mkdir()
    (folder / "adapter_model.safetensors").write_bytes(b"x")
    assert delete_run_files(str(folder), "job_old", roots, protected, folder).removed == 1
    assert not folder.exists()


def test_a_listed_path_through_a_swapped_in_link_is_not_followed(studio, tmp_path):
    data, roots, protected = studio
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    folder = data / "runs" / "job_l"
    claim(folder, "job_l")
    (folder / "sub").mkdir()
    (folder / "sub" / "precious.txt").write_text("run's")
    record_files(folder, "job_l")
    (folder / "sub" / "precious.txt").unlink()
    (folder / "sub").rmdir()
    (folder / "sub").symlink_to(outside)
    delete_run_files(str(folder), "job_l", roots, protected, folder)
    assert (outside / "precious.txt").read_text() == "keep"
