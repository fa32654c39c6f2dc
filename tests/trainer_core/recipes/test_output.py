"""A run's folder: the dataset file the Train tab reads in its format (Alpaca, messages, preference
pairs, embedding pairs), every column of the kept rows, the dropped ones with why, the recipe as
run, the report and the data card."""

from __future__ import annotations

import json

import pytest
import yaml

from trainer_core.data.errors import DatasetError
from trainer_core.data.files import read_file
from trainer_core.data.formats import detect_format
from trainer_core.recipes.library import template_recipe
from trainer_core.recipes.output import DATA_FILE, write_result
from trainer_core.recipes.records import Record
from trainer_core.recipes.run import RecipeResult
from trainer_core.recipes.sources.seeds import Seeds
from trainer_core.settings import Settings

KEPT = [
    Record(
        0,
        {"chunk": "c0", "qa": {"question": "Q0?", "answer": "A0"}},
        {"instruction": "Q0?", "input": "", "output": "A0"},
    ),
    Record(
        2,
        {"chunk": "c2", "qa": {"question": "Q2?", "answer": "A2"}},
        {"instruction": "Q2?", "input": "", "output": "A2"},
    ),
]
DROPPED = [Record(1, {}, None, "grounding", "qa.evidence is not in chunk")]


def _result(kept=KEPT) -> RecipeResult:
    seeds = Seeds(
        [{"chunk": "c"}], ["source", "chunk_index", "chunk"], [{"file": "m.pdf", "sha256": "ab" * 32, "chunks": 3}]
    )
    return RecipeResult(seeds, kept, DROPPED, 3, False, 12.34, 6, 600, 120)


def test_the_folder_holds_a_dataset_the_train_tab_reads_and_its_card(tmp_path):
    settings = Settings(data_dir=tmp_path)
    recipe = template_recipe("qa_from_documents")
    folder = write_result(recipe, _result(), settings)
    assert folder.parent == tmp_path / "recipes" and folder.name.startswith("qa_from_documents-")
    data = read_file(str(folder / DATA_FILE))
    assert detect_format(data.column_names, "data") == "alpaca" and data["instruction"] == ["Q0?", "Q2?"]
    assert [json.loads(line)["record"] for line in (folder / "rows.jsonl").read_text().splitlines()] == [0, 2]
    assert json.loads((folder / "dropped.jsonl").read_text()) == {
        "record": 1,
        "reason": "grounding",
        "detail": "qa.evidence is not in chunk",
    }
    report = json.loads((folder / "report.json").read_text())
    assert (report["made"], report["kept"], report["dropped"]["grounding"], report["dropped"]["schema"]) == (3, 2, 1, 0)
    assert report["model"] == {"endpoint": "http://127.0.0.1:7860/v1", "model": "base"}
    card = (folder / "README.md").read_text()
    assert "`m.pdf` (sha256 `abababababababab…`, 3 chunks)" in card and "kept: **2**" in card
    assert "| grounding | 1 |" in card and f"--dataset {folder / DATA_FILE}" in card
    assert yaml.safe_load((folder / "recipe.yaml").read_text())["model"]["api_key_env"] == "STUDIO_API_TOKEN"


@pytest.mark.parametrize(
    "template, code", [("preference_pairs", None), ("embedding_pairs", "embedding_data_for_generator")]
)
def test_preference_and_embedding_pairs_are_told_apart_from_sft_data(tmp_path, template, code):
    recipe = template_recipe(template)
    row = (
        {"prompt": "p", "chosen": "a", "rejected": "b"}
        if template == "preference_pairs"
        else {"anchor": "q", "positive": "c"}
    )
    folder = write_result(recipe, _result([Record(0, {}, row)]), Settings(data_dir=tmp_path))
    data = read_file(str(folder / DATA_FILE))
    with pytest.raises(DatasetError) as told:  # the SFT reader sends them to DPO / an embedding model
        detect_format(data.column_names, "data")
    assert code is None or told.value.code == code
