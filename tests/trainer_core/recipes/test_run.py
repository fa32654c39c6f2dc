"""A run's records sorted out: each record kept or dropped once, near-duplicates after the gates."""

from __future__ import annotations

from trainer_core.recipes.records import Record
from trainer_core.recipes.run import sorted_out
from trainer_core.recipes.schema import parse_recipe

RECIPE = {
    "name": "r",
    "topics": ["a"],
    "model": {"endpoint": "http://127.0.0.1:9/v1", "model": "m"},
    "columns": [{"name": "fact", "column_type": "llm-text", "prompt": "{{ topic }}"}],
    "gates": {"dedupe": {"column": "fact", "threshold": 0.9}},
    "output": {"format": "alpaca", "fields": {"instruction": "topic", "output": "fact"}},
}


def test_each_record_is_kept_or_dropped_once():
    done = [
        Record(0, {"fact": "Owls hunt at night."}),
        Record(1, {"fact": "owls hunt at night"}),  # a near-duplicate of record 0
        Record(2, {"fact": "x"}, reason="length", detail="too short"),
        Record(3, {"fact": "Tea grows on bushes."}),
    ]
    kept, dropped = sorted_out(parse_recipe(RECIPE), done)
    assert [r.index for r in kept] == [0, 3]
    assert [(r.index, r.reason) for r in dropped] == [(2, "length"), (1, "dedupe")]
