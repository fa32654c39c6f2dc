"""A result folder pushed as a dataset repo, without the Hub (none is reachable here), as the model
push is tested: the files committed, the repo type, a clear error offline or without a token (no
token in it, nothing written), and the start's refusals (an unfinished or unknown folder, a bad
repo id)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from tests.support.recipe_server import task_runner
from trainer_core.export.hub_push import HubPushError
from trainer_core.recipes.hub_push import dataset_operations, push_result, start_dataset_push
from trainer_core.recipes.output import DATA_FILE, RECIPES_FOLDER
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRefused

TOKEN = "hf_DatasetTokenNeverShown0042"


def _folder(root: Path, name: str = "topics-1", report: bool = True) -> Path:
    folder = root / RECIPES_FOLDER / name
    folder.mkdir(parents=True)
    for file in (DATA_FILE, "README.md", "recipe.yaml", "dropped.jsonl", "made.jsonl"):
        (folder / file).write_text("{}\n")
    if report:
        (folder / "report.json").write_text("{}")
    return folder


def test_the_dataset_files_are_committed_not_the_journal(tmp_path):
    ops = dataset_operations(_folder(tmp_path))
    assert [op.path_in_repo for op in ops] == [DATA_FILE, "README.md", "recipe.yaml", "report.json", "dropped.jsonl"]


def test_the_repo_is_a_dataset_repo(tmp_path, monkeypatch):
    import huggingface_hub

    import trainer_core.models.hub as hub

    calls = []

    class Recording:  # records what the Hub is asked for; answers nothing made up
        def __init__(self, token):
            calls.append(("token", token == TOKEN))

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create_repo", repo_id, kwargs["repo_type"], kwargs["private"]))
            return f"https://huggingface.co/datasets/{repo_id}"

        def create_commit(self, repo_id, ops, **kwargs):
            calls.append(("create_commit", repo_id, kwargs["repo_type"], len(ops)))

    monkeypatch.setattr(hub, "hub_reachable", lambda timeout_s=3.0: True)
    monkeypatch.setattr(huggingface_hub, "HfApi", Recording)
    result = push_result({"repo_id": "me/topics", "token": TOKEN}, _folder(tmp_path))
    assert calls == [
        ("token", True),
        ("create_repo", "me/topics", "dataset", True),
        ("create_commit", "me/topics", "dataset", 5),
    ]
    assert result["files"][0] == DATA_FILE and TOKEN not in str(result)


def test_offline_or_without_a_token_is_a_clear_error(tmp_path, monkeypatch):
    import trainer_core.models.hub as hub

    folder = _folder(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout_s=3.0: False)
    with pytest.raises(HubPushError) as offline:
        push_result({"repo_id": "me/topics", "token": TOKEN}, folder)
    assert "could not reach" in str(offline.value) and TOKEN not in str(offline.value)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(HubPushError, match="token"):
        push_result({"repo_id": "me/topics", "token": None}, folder)
    assert sorted(p.name for p in folder.iterdir()) == before


def test_start_refusals(tmp_path):
    settings = Settings(data_dir=tmp_path)
    _folder(tmp_path, "done")
    _folder(tmp_path, "killed", report=False)
    with task_runner(settings) as tasks:
        for result, repo, status in (
            ("killed", "me/x", 400),
            ("nope", "me/x", 404),
            ("..", "me/x", 400),
            ("done", "x", 400),
        ):
            with pytest.raises(TaskRefused) as refused:
                start_dataset_push(tasks, result, repo, SecretStr(TOKEN))
            assert refused.value.status == status, (result, repo)
        assert tasks.current() is None  # the push itself, its stored request: tests/e2e/test_recipe_doors.py
