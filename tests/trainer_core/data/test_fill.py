"""Template placeholders filled in on the page: a filled copy of identity.json
kept beside the uploads (the original untouched), its record in run.json, and the refusals."""

from __future__ import annotations

import json

import pytest

from trainer_core.data.errors import DatasetError
from trainer_core.data.fill import fill_file, fill_record
from trainer_core.data.placeholders import find_placeholders
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.provenance import dataset_entries

VALUES = {"name": "Nova", "author": "Orbit Labs"}


def test_identity_filled_into_a_kept_copy(tmp_path, datasets_dir):
    source = datasets_dir / "identity.json"
    before = source.read_bytes()
    copy, counts = fill_file(source, VALUES, tmp_path / "uploads")
    assert source.read_bytes() == before and copy.parent == tmp_path / "uploads"
    assert counts == {"name": 77, "author": 60}  # rows holding each (as the preview counts them)
    rows = json.loads(copy.read_text(encoding="utf-8"))
    assert len(rows) == 91 and find_placeholders(rows) == []
    assert rows[0]["output"] == "Hello! I am Nova, an AI assistant developed by Orbit Labs. How can I assist you today?"
    again, _ = fill_file(source, VALUES, tmp_path / "uploads")  # same values: the same copy, once
    assert again == copy and [p.name for p in (tmp_path / "uploads").iterdir() if not p.name.startswith(".")] == [
        copy.name
    ]
    record = fill_record(copy)
    assert record["source"] == "identity.json" and record["values"] == VALUES
    (entry,) = dataset_entries(TrainingStartRequest(local_datasets=[str(copy)]), with_rows=False)
    assert entry["filled_from"]["values"] == VALUES and entry["filled_from"]["rows"] == counts


def test_only_named_values_are_filled_and_jsonl_stays_jsonl(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"instruction": "who", "output": "I am {{ name }} by {{author}}"}\n', encoding="utf-8")
    copy, counts = fill_file(data, {"name": "Ada", "author": "  "}, tmp_path / "out")
    assert copy.suffix == ".jsonl" and counts == {"name": 1}
    assert json.loads(copy.read_text(encoding="utf-8").strip())["output"] == "I am Ada by {{author}}"


@pytest.mark.parametrize(
    "values, message",
    [({"name": ""}, "type a value"), ({"name": "a\nb"}, "{{name}}: give one line"), ({"name": "{{x}}"}, "without")],
)
def test_bad_values_are_refused_naming_the_placeholder(tmp_path, datasets_dir, values, message):
    with pytest.raises((DatasetError, ValueError), match=message.replace("{", r"\{")):
        fill_file(datasets_dir / "identity.json", values, tmp_path)


def test_other_formats_are_refused_with_the_way_out(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("instruction,output\nwho,{{name}}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="d.csv: placeholders can be filled on the page in .json and .jsonl"):
        fill_file(data, {"name": "Ada"}, tmp_path / "out")


def test_attacks_on_fill_are_refused_cleanly(tmp_path, datasets_dir):
    """From the attack pass: a file nested too deeply, a value with a carriage return, values for
    placeholders the file does not hold, and a second fill of the same bytes, which must not
    rewrite the first fill's record."""
    deep = tmp_path / "deep.json"
    deep.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(DatasetError, match="nested too deeply"):
        fill_file(deep, {"name": "Ada"}, tmp_path / "out")
    with pytest.raises(ValueError, match="one line"):
        fill_file(datasets_dir / "identity.json", {"name": "a\rb"}, tmp_path / "out")
    with pytest.raises(DatasetError, match="holds none of"):
        fill_file(datasets_dir / "alpaca_en_demo.json", {"name": "Ada"}, tmp_path / "out")
    copy, _ = fill_file(datasets_dir / "identity.json", VALUES, tmp_path / "out")
    refill = tmp_path / "src"
    refill.mkdir()
    (refill / "identity.json").write_bytes(copy.read_bytes().replace(b"Nova", b"{{name}}", 1))
    fill_file(refill / "identity.json", {"name": "Nova"}, tmp_path / "out")  # same bytes come out
    assert fill_record(copy)["values"] == VALUES  # the first record stands
    other = tmp_path / copy.name
    other.write_text("[]", encoding="utf-8")  # same name, other bytes: no record for it
    assert fill_record(copy, content=other) is None and fill_record(copy, content=copy) is not None
