"""What a preview shows of the records it made (kept rows, dropped ones with why, in record order)
and the full run's estimate scaled from them. Made against a model: tests/e2e/test_recipes.py
(the CLI's --preview) and tests/e2e/test_recipe_doors.py (POST /api/recipes/preview)."""

from __future__ import annotations

import yaml

from tests.support.recipe_server import topics_recipe
from trainer_core.recipes.preview import preview_report, shown_records
from trainer_core.recipes.records import Record
from trainer_core.recipes.run import RecipeResult
from trainer_core.recipes.schema import parse_recipe
from trainer_core.recipes.sources.seeds import Seeds


def test_records_are_shown_in_order_with_why_they_were_dropped():
    recipe = parse_recipe(yaml.safe_load(yaml.safe_dump(topics_recipe("http://127.0.0.1:9/v1", "m", ["a"] * 10))))
    kept = [Record(2, output={"instruction": "q", "input": "", "output": "a"}), Record(0, output={"instruction": "p"})]
    dropped = [Record(1, reason="length", detail="topic is 1 characters, under 3")]
    result = RecipeResult(Seeds([{"topic": "a"}] * 10, ["topic"]), kept, dropped, 3, False, 6.0, 3, 30, 12)
    assert shown_records(result) == [
        {"record": 0, "row": {"instruction": "p"}},
        {"record": 1, "dropped": "length", "why": "topic is 1 characters, under 3"},
        {"record": 2, "row": {"instruction": "q", "input": "", "output": "a"}},
    ]
    report = preview_report(recipe, result)
    assert report["preview"]["made"] == 3 and report["preview"]["dropped"]["length"] == 1
    assert report["full_run_estimate"] == {"records": 10, "seconds": 20, "tokens": 140}
