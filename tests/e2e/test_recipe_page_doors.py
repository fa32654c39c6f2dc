"""The "Make a dataset from documents" panel's events called raw, as an attacker would (the whole app,
login and token on; no model is reached: every call here is refused before a request): files and
folders outside the allowed ones, result names that climb out of ``DATA_DIR/recipes``, a key that
must never come back or reach the log, and recipes too big or built to expand."""

from __future__ import annotations

import json
import logging

import pytest

from tests.e2e.conftest import CANARY, assert_no_canary, logged_in, snapshot
from tests.support.raw_gradio import RawGradio, error_text, file_value
from trainer_core.recipes.library import template_text

pytestmark = pytest.mark.slow
KEY = "sk-recipe-key-that-must-never-echo-7"


def _page_values(recipe: str, **fields) -> list:
    """The inputs of recipe_preview / recipe_run: recipe, key, then the panel's fields in order."""
    values = dict(docs=None, paths="", seed="", topics="", chunk=512, overlap=64, tokenizer="", endpoint="",
                  model="base", concurrency=1)  # fmt: skip
    values.update(fields)
    return [recipe, KEY, *values.values()]


def _notice(message: dict) -> str:
    assert message.get("success"), error_text(message)[:300]
    data = message["output"]["data"]
    return json.dumps(data)


def test_documents_and_seeds_outside_the_allowed_folders_are_refused(studio, outside):
    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    preview, run = raw.fn_index("recipe_preview"), raw.fn_index("recipe_run")
    before = snapshot(outside)
    recipe = template_text("embedding_pairs")
    for fields, said in (
        ({"docs": [file_value(str(outside / "canary.jsonl"))]}, "not uploaded"),
        ({"paths": str(outside)}, "path_not_allowed"),
        ({"paths": str(settings.data_dir / ".." / outside.name)}, "path_not_allowed"),
        ({"seed": str(outside / "canary.jsonl")}, "seed_rows"),
    ):
        for fn in (preview, run):
            message = raw.call(fn, _page_values(recipe, endpoint="http://127.0.0.1:9/v1", **fields))
            text = json.dumps(message)
            assert CANARY not in text and KEY not in text, text[:400]
            assert said in text or said in error_text(message), (fields, text[:400])
    (settings.data_dir / "notes.md").write_text("# Notes\n\nA paragraph of notes to cut into chunks.\n")
    tokenizer = _page_values(recipe, paths=str(settings.data_dir / "notes.md"), tokenizer=str(outside / "model"))
    said = _notice(raw.call(preview, [*tokenizer[:-3], "http://127.0.0.1:9/v1", *tokenizer[-2:]]))
    assert "Tokenizer that counts the tokens: " in said and "is not on this machine" in said and CANARY not in said
    assert runner.status().phase.value == "idle"
    assert snapshot(outside) == before
    assert not (settings.data_dir / "recipes").exists() or not any((settings.data_dir / "recipes").iterdir())
    assert_no_canary(settings.data_dir)


def test_result_names_never_leave_the_recipes_folder(studio, outside):
    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    use, resume = raw.fn_index("recipe_use"), raw.fn_index("recipe_resume")
    (settings.data_dir / "data.jsonl").write_text('{"text": "beside"}\n')
    for name in ("..", "../..", str(outside), f"../{outside.name}", "x/../../..", "\x00", "a" * 5000, {"x": 1}):
        message = raw.call(use, [name])
        text = json.dumps(message)
        assert CANARY not in text and str(settings.data_dir) not in text, text[:400]
        if message.get("success"):
            upload, paths, *_, said = message["output"]["data"]
            assert "value" not in paths and "Result:" in said["value"]
        shown = raw.call(resume, [KEY, name])
        assert KEY not in json.dumps(shown) and runner.status().phase.value == "idle"


def test_the_key_never_comes_back_nor_reaches_the_log(studio, caplog, capfd):
    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    recipe = template_text("embedding_pairs")
    with caplog.at_level(logging.DEBUG):
        for endpoint in ("http://example.com/v1", f"http://user:{KEY}@127.0.0.1:9/v1", "ftp://127.0.0.1/v1"):
            for api_name in ("recipe_preview", "recipe_run"):
                values = _page_values(recipe, paths=str(settings.data_dir / "notes.md"), endpoint=endpoint)
                message = raw.call(raw.fn_index(api_name), values)
                assert KEY not in json.dumps(message) and "endpoint" in json.dumps(message), message
        raw.call(raw.fn_index("recipe_stop"), [])
    captured = capfd.readouterr()
    assert KEY not in captured.out + captured.err and KEY not in caplog.text


def test_huge_and_expanding_recipes_are_refused_in_the_notice(studio):
    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    preview = raw.fn_index("recipe_preview")
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, n in zip("abcdefgh", "bcdefghi")
    )
    for recipe, said in (
        ("name: x\ndescription: " + "y" * (300 * 1024), "a recipe is at most 256 KB"),
        (laughs, "aliases (*name) are not taken"),
        ("[1, 2", "cannot be read as YAML"),
        ("- a list", "a recipe is a mapping"),
    ):
        assert said in _notice(raw.call(preview, _page_values(recipe, topics="a"))), said
    assert runner.status().phase.value == "idle"
