"""A recipe run as a task against the studio's own /v1 serving the tiny model (a real inference
worker; its answers are noise, the counts say what was kept): the result folder and counts, the
task in the listings, Stop keeping what was made with a data card that says where it stopped, and
resume finishing it in the same folder, each record made once. The key (the studio's token, for
its own /v1) is in no file and not in the task store."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import TOKEN
from tests.support.recipe_server import studio_v1, task_runner, topics_recipe
from trainer_core.recipes.journal import read_made
from trainer_core.recipes.output import DATA_FILE, RECIPES_FOLDER
from trainer_core.recipes.task import start_recipe_task
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase

pytestmark = pytest.mark.slow
TOPICS = ["cats", "ox", "dogs", "birds", "ai", "fish", "ants", "bees", "moths", "crows"]  # ox, ai: too short


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    """(task runner, /v1 URL, model id)."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("recipe-task"), api_token=TOKEN, allowed_paths=str(tiny_model_dir.parent)
    )
    with studio_v1(settings, tiny_model_dir) as (url, model):
        with task_runner(settings) as tasks:
            yield tasks, url, model


def _text(served, topics=TOPICS) -> str:
    return yaml.safe_dump(topics_recipe(served[1], served[2], topics))


def _no_key(tasks: TaskRunner, folder: Path) -> None:
    for path in [tasks.settings.db_path, *folder.iterdir()]:
        assert TOKEN.encode() not in path.read_bytes(), path


def test_a_recipe_task_writes_its_result_folder(served) -> None:
    tasks = served[0]
    record = start_recipe_task(tasks, _text(served, TOPICS[:4]))
    assert record.kind == TaskKind.recipe and record.request == {
        "recipe": "topics_qa",
        "format": "alpaca",
        "resume": None,
    }
    assert tasks.wait(300)
    done = tasks.get(record.task_id)
    assert done.phase == TaskPhase.completed and done.progress == 1.0, done.error
    result, folder = done.result, Path(done.output_dir)
    assert folder.parent == tasks.settings.data_dir / RECIPES_FOLDER and result["output_dir"] == str(folder)
    assert result["data_file"] == str(folder / DATA_FILE) and result["format"] == "alpaca"
    counts = result["counts"]
    assert counts["records"] == counts["made"] == 4 and counts["dropped"]["length"] == 1
    assert counts["kept"] + sum(counts["dropped"].values()) == 4 and result["stopped"] is False
    rows = [json.loads(line) for line in (folder / DATA_FILE).read_text().splitlines()]
    assert len(rows) == counts["kept"] and all(set(r) == {"instruction", "input", "output"} for r in rows)
    assert done.message == f"Done: {counts['kept']} rows kept of 4 made"
    assert record.task_id in [t.task_id for t in tasks.list(kind=TaskKind.recipe)]
    _no_key(tasks, folder)


def test_stop_keeps_what_was_made_and_resume_finishes_it(served) -> None:
    tasks = served[0]
    record = start_recipe_task(tasks, _text(served))
    deadline = time.monotonic() + 300
    while tasks.get(record.task_id).progress == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tasks.cancel(record.task_id)
    assert tasks.wait(200)
    stopped = tasks.get(record.task_id)
    assert stopped.phase == TaskPhase.cancelled and stopped.result["stopped"] is True, stopped.error
    made, folder = stopped.result["counts"]["made"], Path(stopped.output_dir)
    assert 1 <= made < len(TOPICS) and stopped.message.startswith(f"Stopped at {made} of {len(TOPICS)}")
    assert f"(stopped at {made} of {len(TOPICS)})" in (folder / "README.md").read_text()
    kept = stopped.result["counts"]["kept"]
    assert len((folder / DATA_FILE).read_text().splitlines()) == kept

    resumed = start_recipe_task(tasks, "", resume=record.task_id)  # the folder's own recipe
    assert resumed.output_dir == str(folder) and resumed.request["resume"] == record.task_id
    assert tasks.wait(300)
    done = tasks.get(resumed.task_id)
    assert done.phase == TaskPhase.completed and done.result["stopped"] is False, done.error
    counts = done.result["counts"]
    assert counts["made"] == counts["records"] == len(TOPICS) and counts["dropped"]["length"] == 2
    assert [r.index for r in read_made(folder)] == list(range(len(TOPICS)))  # each record made once
    assert len((folder / DATA_FILE).read_text().splitlines()) == counts["kept"]
    assert "stopped at" not in (folder / "README.md").read_text()
    _no_key(tasks, folder)
