"""The recipe panel's preview and run handlers without a model: the preview's table (kept or dropped
and why, then the columns) and estimate, refusals in the panel's notice with their code and never
the key, Stop with nothing running, and a finished task's counts in its status line."""

from __future__ import annotations

import html

import pytest

from trainer_core.recipes.library import template_text
from trainer_core.recipes.records import Record
from trainer_core.recipes.run import RecipeResult
from trainer_core.recipes.sources.seeds import Seeds
from trainer_core.runs.job import JobRunner
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from ui import recipe_form as form
from ui import recipe_run

KEY = "sk-the-key-that-must-never-show-42"


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allowed_paths=str(tmp_path))


def _result() -> RecipeResult:
    kept = [Record(0, {"chunk": "x" * 400, "query": "what is x"}, {"anchor": "what is x", "positive": "x"})]
    dropped = [Record(1, {"chunk": "y", "query": "?"}, reason="length", detail="query has 1 characters, min 5")]
    return RecipeResult(Seeds([{}, {}, {}, {}], ["chunk"]), kept, dropped, 2, False, 2.0, 2, 100, 20)


def test_the_preview_table_and_estimate():
    result = _result()
    table = recipe_run.preview_table(result)
    assert list(table.columns) == [*recipe_run.PREVIEW_COLUMNS, "query", "chunk"]  # the model's columns first
    assert table.iloc[0, :3].tolist() == [1, "yes", ""]
    assert table.iloc[1, :3].tolist() == [2, "no", "length: query has 1 characters, min 5"]
    assert len(table.iloc[0]["chunk"]) == recipe_run.CELL_CHARS and table.iloc[0]["chunk"].endswith("…")
    text = recipe_run.estimate_text({"records": 4, "seconds": 4, "tokens": 240}, result)
    assert text.startswith("Preview: 1 of 2 rows kept (dropped: length 1) in 2.0 s.")
    assert "4 records" in text and "240 tokens" in text


@pytest.mark.parametrize("endpoint", [f"http://{KEY}@example.com/v1", "http://example.com/v1"])
def test_a_refused_preview_shows_the_key_nowhere(settings, endpoint, tmp_path):
    fields = form.PageFields(doc_paths=str(tmp_path / "a.md"), endpoint=endpoint)
    tasks = TaskRunner(JobRunner(runs_dir=settings.runs_dir), settings)
    table, estimate, said = recipe_run.preview(tasks, template_text("embedding_pairs"), fields, KEY)
    assert table == {"__type__": "update"} and estimate["value"] == ""
    assert said["value"].startswith('<div class="queue-note" data-code="') and "endpoint" in html.unescape(
        said["value"]
    )
    assert KEY not in said["value"]


def test_the_key_is_scrubbed_from_what_a_server_echoes():
    from pydantic import SecretStr

    assert recipe_run.scrubbed(f"401: bad key {KEY}", SecretStr(KEY)) == "401: bad key ***"
    assert recipe_run.scrubbed("text", None) == "text"


def test_run_refusals_and_stop_with_nothing_running(settings):
    tasks = TaskRunner(JobRunner(runs_dir=settings.runs_dir), settings)
    fields = form.PageFields(doc_paths="/etc/passwd", endpoint="http://127.0.0.1:9/v1")
    status, task, said = next(recipe_run.run(tasks, template_text("embedding_pairs"), fields, KEY))
    assert status == "" and task is None and 'data-code="path_not_allowed"' in said and KEY not in said
    status, task, said = next(recipe_run.run(tasks, "", form.PageFields(), KEY, resume="nope"))
    assert task is None and "resume" in said and KEY not in said
    assert 'data-code="not_running"' in recipe_run.stop(tasks)


def test_a_finished_tasks_counts_in_its_status_line():
    record = TaskRecord(
        task_id="task_1",
        kind=TaskKind.recipe,
        model="writer base",
        phase=TaskPhase.completed,
        result={"counts": {"kept": 3, "made": 4, "dropped": {"length": 1, "dedupe": 0}}, "stopped": True},
    )
    text = recipe_run.progress_text(record)
    assert "**Dropped by gate:** length 1. Stopped: *Resume*" in text


def test_the_preview_waits_while_training_or_a_task_runs(settings, tmp_path, monkeypatch):
    from trainer_core.tasks.runner import TaskRefused

    tasks = TaskRunner(JobRunner(runs_dir=settings.runs_dir), settings)
    monkeypatch.setattr(
        tasks, "check_idle", lambda: (_ for _ in ()).throw(TaskRefused("A training job is running", 409))
    )
    fields = form.PageFields(doc_paths=str(tmp_path / "a.md"), endpoint="http://127.0.0.1:9/v1")
    table, estimate, said = recipe_run.preview(tasks, template_text("embedding_pairs"), fields, KEY)
    assert 'data-code="busy">A training job is running' in said["value"] and table == {"__type__": "update"}
