"""The result folders listed with their counts: a finished run's from its report, a killed run's
from the records it appended (not finished), a link out of the recipes folder not listed."""

from __future__ import annotations

import json

from trainer_core.recipes.journal import MADE_FILE
from trainer_core.recipes.output import RECIPES_FOLDER
from trainer_core.recipes.results import list_results
from trainer_core.settings import Settings


def test_results_are_listed_with_their_counts(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    assert list_results(settings) == []
    root = settings.data_dir / RECIPES_FOLDER
    done, killed, outside = root / "done", root / "killed", tmp_path / "outside"
    for folder in (done, killed, outside):
        folder.mkdir(parents=True)
        (folder / "recipe.yaml").write_text("name: x\n")
    counts = {"records": 4, "made": 4, "kept": 3, "dropped": {"grounding": 1}}
    (done / "report.json").write_text(json.dumps({**counts, "format": "alpaca", "recipe": "x", "stopped": False}))
    made = [
        {"record": 0, "row": {}, "output": {"instruction": "a"}, "reason": None},
        {"record": 1, "row": {}, "output": None, "reason": "schema", "detail": "no JSON"},
    ]
    (killed / MADE_FILE).write_text("".join(json.dumps(line) + "\n" for line in made))
    (root / "link").symlink_to(outside, target_is_directory=True)
    found = {r["name"]: r for r in list_results(settings)}
    assert set(found) == {"done", "killed"}
    assert found["done"]["counts"] == counts and found["done"]["finished"] and found["done"]["format"] == "alpaca"
    assert found["killed"]["counts"] == {"records": None, "made": 2, "kept": 1, "dropped": {"schema": 1}}
    assert not found["killed"]["finished"] and found["killed"]["stopped"]


def test_a_resume_killed_after_the_earlier_parts_report_is_not_listed_finished(tmp_path):
    """Stopped at 1 of 4 (its report written), resumed, the worker killed after 2 more records:
    the earlier part's report is stale; the list counts the appended records and says resume."""
    import os

    settings = Settings(data_dir=tmp_path / "data")
    folder = settings.data_dir / RECIPES_FOLDER / "resumed"
    folder.mkdir(parents=True)
    (folder / "recipe.yaml").write_text("name: x\n")
    counts = {"records": 4, "made": 1, "kept": 1, "dropped": {}}
    (folder / "report.json").write_text(json.dumps({**counts, "format": "alpaca", "recipe": "x", "stopped": True}))
    made = [{"record": i, "row": {}, "output": {"instruction": str(i)}, "reason": None} for i in range(3)]
    (folder / MADE_FILE).write_text("".join(json.dumps(line) + "\n" for line in made))
    written = (folder / "report.json").stat().st_mtime_ns
    os.utime(folder / MADE_FILE, ns=(written + 10**9, written + 10**9))  # appended a second later
    (found,) = list_results(settings)
    assert found["counts"] == {"records": 4, "made": 3, "kept": 3, "dropped": {}}
    assert not found["finished"] and found["stopped"] and found["format"] == "alpaca"
