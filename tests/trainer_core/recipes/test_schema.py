"""Recipes as YAML: the built-in templates parse, one source only, names checked against seeds and
earlier columns, output fields fit their format, files refused by name; the YAML written keeps no key."""

from __future__ import annotations

import pytest
import yaml

from trainer_core.recipes.errors import RecipeError
from trainer_core.recipes.library import template_names, template_recipe, template_text
from trainer_core.recipes.schema import DOCUMENT_COLUMNS, parse_recipe, read_recipe, recipe_yaml


def _qa() -> dict:
    return yaml.safe_load(template_text("qa_from_documents"))


def test_every_template_parses_and_reads_only_known_names():
    assert template_names() == [
        "embedding_pairs",
        "instruction_variations",
        "multi_turn",
        "preference_pairs",
        "qa_from_documents",
    ]
    for name in template_names():
        recipe = template_recipe(name)
        seeds = list(DOCUMENT_COLUMNS) if recipe.documents else ["instruction", "input", "output"]
        recipe.check_names(seeds)
    with pytest.raises(RecipeError, match="is not a built-in recipe"):
        template_text("../etc")


def test_exactly_one_source():
    data = _qa()
    data["topics"] = ["tea"]
    with pytest.raises(
        RecipeError, match="give exactly one of documents, seed_rows or topics \\(given: documents, topics\\)"
    ):
        parse_recipe(data)


def test_names_a_template_reads_must_exist_before_it():
    data = _qa()
    data["columns"][1]["prompt"] = "{{ quality }} {{ chunk }}"  # quality comes later
    with pytest.raises(RecipeError, match="columns.qa: reads quality, not a seed column nor an earlier column"):
        parse_recipe(data).check_names(list(DOCUMENT_COLUMNS))
    data = _qa()
    data["output"]["fields"]["output"] = "answer"
    with pytest.raises(RecipeError, match="output: 'answer' names no column"):
        parse_recipe(data).check_names(list(DOCUMENT_COLUMNS))


def test_output_fields_fit_the_format_and_judge_gates_name_a_score():
    data = _qa()
    data["output"] = {"format": "preference", "fields": {"prompt": "qa.question", "best": "qa.answer"}}
    with pytest.raises(
        RecipeError, match="format preference takes prompt, chosen, rejected; missing chosen, rejected; unknown best"
    ):
        parse_recipe(data)
    data = _qa()
    data["gates"]["judge"][0]["score"] = "style"
    with pytest.raises(RecipeError, match="gates.judge: quality.style is not a judge column's score"):
        parse_recipe(data)


def test_unknown_keys_and_bad_values_are_named():
    data = _qa()
    data["model"]["api_key"] = "sk-inline"  # keys live in the environment, never in the recipe
    with pytest.raises(RecipeError, match="model.api_key: Extra inputs are not permitted"):
        parse_recipe(data)
    for url in ("http://user:sk-123@127.0.0.1:7860/v1", "http://127.0.0.1:7860/v1?key=sk-123"):
        data = _qa()
        data["model"]["endpoint"] = url
        with pytest.raises(RecipeError, match="model.endpoint: credentials or a query in the URL are not taken"):
            parse_recipe(data)
    data = _qa()
    data["model"]["inference_parameters"]["max_parallel_requests"] = 0
    with pytest.raises(RecipeError, match="max_parallel_requests"):
        parse_recipe(data)


def test_files_relative_paths_and_broken_yaml(tmp_path):
    (tmp_path / "r.yaml").write_text(template_text("instruction_variations"), encoding="utf-8")
    assert read_recipe(tmp_path / "r.yaml").seed_rows == str(tmp_path / "seeds.json")
    (tmp_path / "bad.yaml").write_text("name: [unclosed", encoding="utf-8")
    with pytest.raises(RecipeError, match="bad.yaml: cannot be read as YAML"):
        read_recipe(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="list.yaml: a recipe is a mapping"):
        read_recipe(tmp_path / "list.yaml")


def test_the_yaml_written_parses_back_and_names_only_the_key_variable():
    recipe = template_recipe("qa_from_documents")
    text = recipe_yaml(recipe)
    assert parse_recipe(yaml.safe_load(text)) == recipe
    assert "api_key_env: STUDIO_API_TOKEN" in text and "api_key:" not in text
