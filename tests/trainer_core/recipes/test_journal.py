"""The journal of a recipe run: each record appended as it is made, read back by a resume."""

from __future__ import annotations

import json

from trainer_core.recipes.journal import MADE_FILE, Journal, read_made
from trainer_core.recipes.records import Record


def test_a_resume_after_a_kill_mid_line_keeps_its_own_records(tmp_path) -> None:
    """A killed worker can leave a line cut short in made.jsonl and data.jsonl; the resumed run's
    first record must not be glued onto it (it would be lost to the next resume, and data.jsonl
    would hold a broken line until the run finishes)."""
    first = {"record": 0, "row": {"topic": "a"}, "output": {"instruction": "a"}, "reason": None, "detail": ""}
    (tmp_path / MADE_FILE).write_text(json.dumps(first) + "\n" + '{"record": 1, "row": {"to')
    (tmp_path / "data.jsonl").write_text('{"instruction": "a"}\n{"instru')
    journal = Journal(tmp_path, "data.jsonl")
    journal.append(Record(1, {"topic": "b"}, {"instruction": "b"}))
    journal.close()
    assert [(r.index, r.output) for r in read_made(tmp_path)] == [(0, {"instruction": "a"}), (1, {"instruction": "b"})]
    assert (tmp_path / "data.jsonl").read_text().splitlines()[-1] == '{"instruction": "b"}'
