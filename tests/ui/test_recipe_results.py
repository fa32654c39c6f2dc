"""The recipe panel's results: folders listed with their counts, the data card and a download copy
of the dataset, *Use this dataset* filling the Train form's fields for each format, and any name
that is not a result folder's refused naming the Result box."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from trainer_core.recipes.output import DATA_FILE
from trainer_core.settings import Settings
from ui import recipe_results as results


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


def _result(settings: Settings, name: str, fmt: str, report: bool = True) -> Path:
    folder = results.folder_of(settings) / name
    folder.mkdir(parents=True)
    (folder / DATA_FILE).write_text('{"instruction": "q", "output": "a"}\n', encoding="utf-8")
    (folder / "recipe.yaml").write_text(f"output: {{format: {fmt}}}\n", encoding="utf-8")
    if report:
        dropped = {"grounding": 2, "judge": 1}
        body = {"format": fmt, "records": 4, "kept": 1, "made": 4, "dropped": dropped, "stopped": False}
        (folder / "report.json").write_text(json.dumps(body), encoding="utf-8")
        (folder / "README.md").write_text(f"# {name}\ncard", encoding="utf-8")
    return folder


def test_results_are_listed_with_their_counts(settings):
    assert results.refresh(settings)[0]["value"].empty
    _result(settings, "qa-1", "alpaca")
    _result(settings, "pairs-2", "preference", report=False)  # still running: no report yet
    table = results.refresh(settings)[0]["value"].set_index("result")
    assert table.loc["qa-1"].tolist() == ["alpaca", 1, 4, 3, "no"]
    assert table.loc["pairs-2"].tolist() == ["", 0, 0, 0, "unfinished"]
    shown, choice = results.refresh(settings, "qa-1")
    assert choice["value"] == "qa-1" and sorted(choice["choices"]) == ["pairs-2", "qa-1"]


def test_the_card_and_a_download_copy(settings):
    folder = _result(settings, "qa-1", "alpaca")
    card, download, said = results.card(settings, "qa-1")
    assert card["value"] == "# qa-1\ncard" and said["value"] == ""
    assert Path(download["value"]).read_bytes() == (folder / DATA_FILE).read_bytes()
    assert Path(download["value"]).name == f"qa-1-{DATA_FILE}"
    _result(settings, "open-2", "alpaca", report=False)
    assert "no data card yet" in results.card(settings, "open-2")[0]["value"]


@pytest.mark.parametrize(
    "fmt, sets",
    [
        ("alpaca", ["alpaca", "sft", None]),
        ("messages", ["messages", "sft", None]),
        ("preference", ["preference", "dpo", None]),
        ("embedding_pairs", ["auto", "sft", "yes"]),
    ],
)
def test_use_this_dataset_fills_the_train_form(settings, fmt, sets):
    folder = _result(settings, f"r-{fmt}", fmt, report=fmt != "messages")  # messages: read from recipe.yaml
    upload, paths, *fields, said = results.use(settings, f"r-{fmt}")
    assert upload["value"] is None and paths["value"] == str((folder / DATA_FILE).resolve())
    assert [f.get("value") for f in fields] == sets
    assert f"r-{fmt}/{DATA_FILE}" in said["value"]


def test_names_outside_the_results_are_refused_naming_the_box(settings, tmp_path):
    _result(settings, "qa-1", "alpaca")
    (tmp_path / "data" / DATA_FILE).write_text("{}\n")  # a dataset file beside, not a result
    for name, why in (
        ("", "choose a result first"),
        ("..", "is not a result's name"),
        ("../qa-1", "is not a result's name"),
        (str(results.folder_of(settings) / "qa-1"), "is not a result's name"),
        ("nope", "no result 'nope'"),
    ):
        *_, said = results.use(settings, name)
        assert said["value"].startswith('<div class="queue-note" data-code="not_found">Result: ')
        assert why in html.unescape(said["value"])
        assert results.card(settings, name)[1]["value"] is None


HUB_TOKEN = "hf_PagePushTokenNeverShown77"


def test_push_refusals_name_the_boxes(settings):
    from tests.support.recipe_server import task_runner

    _result(settings, "qa-1", "alpaca")
    _result(settings, "open-2", "alpaca", report=False)
    with task_runner(settings) as tasks:
        for name, repo, code, said in (
            ("", "me/x", "not_found", "Result: choose a result first"),
            ("../x", "me/x", "not_found", "Result:"),
            ("open-2", "me/x", "result_unfinished", "resume it, then push"),
            ("qa-1", "x", "invalid_setting", "Hub dataset repository:"),
        ):
            lines = list(results.push(tasks, name, repo, True, HUB_TOKEN))
            assert len(lines) == 1 and f'data-code="{code}"' in lines[0] and said in html.unescape(lines[0]), lines
            assert HUB_TOKEN not in lines[0]
        assert tasks.current() is None


def test_a_push_runs_as_a_task_and_says_why_it_failed_offline(settings, monkeypatch):
    """No Hub is reachable here: the push task ends failed saying so, the token in no line shown."""
    from tests.support.recipe_server import task_runner

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _result(settings, "qa-1", "alpaca")
    with task_runner(settings) as tasks:
        lines = list(results.push(tasks, "qa-1", "me/qa", True, HUB_TOKEN))
    assert "push" in lines[0] and "· failed" in lines[-1], lines
    assert "reach" in lines[-1] and not any(HUB_TOKEN in line for line in lines)
