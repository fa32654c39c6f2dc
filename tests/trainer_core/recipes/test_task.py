"""A recipe task without a model: the refusals made before a worker starts (a remote endpoint, a
document, seed file or resume folder outside the allowed folders, an environment variable the
server does not read, a broken recipe), the progress message, and the records of a killed worker
read back. Runs, Stop and resume against a served model: tests/e2e/test_recipe_task.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.recipe_server import task_runner, topics_recipe
from trainer_core.recipes.journal import MADE_FILE, read_made
from trainer_core.recipes.task import start_recipe_task
from trainer_core.recipes.task_worker import progress_message
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRefused


def recipe_data(**changes) -> dict:
    return {**topics_recipe("http://127.0.0.1:9/v1", "base", ["cats", "dogs"]), **changes}


def recipe_text(**changes) -> str:
    return yaml.safe_dump(recipe_data(**changes))


@pytest.fixture
def tasks(tmp_path: Path):
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(tmp_path / "mine"))
    (tmp_path / "mine").mkdir()
    with task_runner(settings) as runner:
        yield runner


def test_a_killed_worker_s_records_are_read_back(tmp_path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    line = {"record": 0, "row": {"topic": "a"}, "output": {"instruction": "q"}, "reason": None, "detail": ""}
    (folder / MADE_FILE).write_text(json.dumps(line) + "\n" + '{"record": 1, "row": {"to')  # cut off mid-line
    assert [(r.index, r.output) for r in read_made(folder)] == [(0, {"instruction": "q"})]


def test_the_progress_message_says_why_rows_were_dropped() -> None:
    assert progress_message(12, 40, {"grounding": 2, "schema": 1, "judge": 0}) == (
        "12 / 40 rows, 3 dropped (grounding 2, schema 1)"
    )


def _refusal(tasks, text: str, **kwargs) -> TaskRefused:
    with pytest.raises(TaskRefused) as refused:
        start_recipe_task(tasks, text, **kwargs)
    assert tasks.current() is None  # refused before a worker started
    return refused.value


def test_refusals_before_a_worker_starts(tasks, tmp_path) -> None:
    remote = recipe_data()
    remote["model"]["endpoint"] = "https://api.example.com/v1"
    assert _refusal(tasks, yaml.safe_dump(remote)).code == "remote_writer_model"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.md").write_text("# not yours\n")
    (outside / "rows.jsonl").write_text('{"topic": "x"}\n')
    docs = _refusal(tasks, recipe_text(topics=[], documents=[str(outside / "secret.md")]))
    assert docs.status == 400 and "documents" in docs.fields
    seeds = _refusal(tasks, recipe_text(topics=[], seed_rows=str(tmp_path / "mine" / ".." / "elsewhere/rows.jsonl")))
    assert seeds.status == 400 and "seed_rows" in str(seeds)
    env = recipe_data()
    env["model"]["api_key_env"] = "HF_TOKEN"
    assert "api_key_env" in _refusal(tasks, yaml.safe_dump(env)).fields
    for resume in ("../../elsewhere", str(outside), "no-such-run"):
        refused = _refusal(tasks, "", resume=resume)
        assert refused.fields == ("resume",) and refused.status in (400, 404)
    assert _refusal(tasks, "columns: [").status == 400


def test_a_recipe_run_cut_off_by_the_app_stopping_keeps_its_folder(tmp_path) -> None:
    from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
    from trainer_core.tasks.store import TaskStore

    folder = tmp_path / "recipes" / "topics-1"
    folder.mkdir(parents=True)
    (folder / MADE_FILE).write_text("")
    store = TaskStore(tmp_path / "studio.db")
    store.save(TaskRecord(task_id="recipe-1", kind=TaskKind.recipe, model="base", output_dir=str(folder)))
    assert store.mark_interrupted() == 1
    assert store.get("recipe-1").phase == TaskPhase.failed and (folder / MADE_FILE).is_file()  # resumable
