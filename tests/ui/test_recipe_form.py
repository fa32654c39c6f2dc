"""The recipe panel's recipe: the page's fields laid over the editor's YAML, refusals naming the
recipe key or the page's label, the fields' bounds taken from the recipe schema, the columns listed."""

from __future__ import annotations

import re

import pytest
import yaml

from trainer_core.recipes.library import template_text
from trainer_core.recipes.sources.chunks import Chunking
from trainer_core.refusals import Refusal
from trainer_core.settings import Settings
from ui import recipe_form as form


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allowed_paths=str(tmp_path))


def test_the_fields_bounds_are_the_schemas():
    assert form.CHUNK_BOUNDS["value"] == Chunking().chunk_tokens
    assert form.CHUNK_BOUNDS["minimum"] == 16 and form.CHUNK_BOUNDS["maximum"] == 32_768
    assert form.OVERLAP_BOUNDS == {"value": Chunking().overlap_tokens, "precision": 0, "minimum": 0}
    assert form.CONCURRENCY_BOUNDS["minimum"] == 1 and form.CONCURRENCY_BOUNDS["maximum"] == 64


def test_the_page_fields_replace_the_recipes_sources_chunking_and_writer(settings, tmp_path):
    fields = form.PageFields(
        doc_paths=f"{tmp_path}/a.pdf, {tmp_path}/docs",
        chunk_tokens=128.0,
        overlap_tokens=16,
        tokenizer=" /models/tiny ",
        endpoint="http://127.0.0.1:9999/v1",
        model="job_1",
        concurrency=2,
    )
    recipe = form.compose(template_text("qa_from_documents"), fields, settings)
    assert recipe.documents == [f"{tmp_path}/a.pdf", f"{tmp_path}/docs"]
    assert (recipe.chunking.chunk_tokens, recipe.chunking.overlap_tokens) == (128, 16)
    assert recipe.chunking.tokenizer == "/models/tiny"
    assert (recipe.model.endpoint, recipe.model.model) == ("http://127.0.0.1:9999/v1", "job_1")
    assert recipe.model.inference_parameters.max_parallel_requests == 2
    assert recipe.model.inference_parameters.max_tokens == 512  # the recipe's own values stay
    data = yaml.safe_load(template_text("qa_from_documents"))
    topics = form.laid_over(data, form.PageFields(topics="a\n\n b \n"), settings)
    assert topics["topics"] == ["a", "b"] and "documents" not in topics  # a source on the page replaces the recipe's
    with pytest.raises(Refusal, match=r"^columns\.qa: reads chunk, not a seed column"):  # topics give no chunk
        form.compose(template_text("qa_from_documents"), form.PageFields(topics="a"), settings)
    untouched = form.compose(template_text("qa_from_documents"), form.PageFields(), settings)
    assert untouched.documents == ["my_documents/"] and untouched.chunking.chunk_tokens == 512


def test_refusals_name_the_recipe_key_or_the_pages_label(settings):
    text = template_text("qa_from_documents")
    with pytest.raises(Refusal) as caught:
        form.compose(text, form.PageFields(chunk_tokens=64, overlap_tokens=64), settings)
    assert str(caught.value).startswith(f"{form.OVERLAP_LABEL}: ")
    assert "chunking.overlap_tokens (64) must be below chunking.chunk_tokens (64)" in str(caught.value)
    with pytest.raises(Refusal, match="^" + re.escape(f"{form.CHUNK_LABEL}: a whole number")):
        form.compose(text, form.PageFields(chunk_tokens="12.5"), settings)
    with pytest.raises(Refusal) as caught:
        form.compose(text, form.PageFields(concurrency=500), settings)
    assert str(caught.value) == f"{form.CONCURRENCY_LABEL}: from 1 to 64 (500 given)"
    with pytest.raises(Refusal, match="^" + re.escape(f"{form.OVERLAP_LABEL}: from 0 (-1 given)")):
        form.compose(text, form.PageFields(overlap_tokens=-1), settings)
    broken = yaml.safe_load(text)
    broken["columns"][1]["prompt"] = "{{ nowhere }}"
    with pytest.raises(Refusal, match=r"^columns\.qa: reads nowhere"):
        form.compose(yaml.safe_dump(broken), form.PageFields(), settings)
    with pytest.raises(Refusal, match="^recipe: cannot be read as YAML"):
        form.compose("a: [", form.PageFields(), settings)


def test_the_columns_are_listed_or_the_refusal_shown():
    listed = form.columns_text(template_text("qa_from_documents"))
    assert "`question_type` (sampler)" in listed and "`qa` (llm-structured)" in listed
    assert "**Output:** alpaca (instruction, output)" in listed
    said = form.columns_text("name: x\n")
    assert 'data-code="invalid_setting"' in said or 'data-code="recipe_invalid"' in said
    assert "model" in said and "columns" in said
    huge = form.columns_text("a: " + "x" * (300 * 1024))
    assert "a recipe is at most 256 KB" in huge


def test_an_upload_not_received_by_this_server_is_refused_naming_the_box(settings, tmp_path):
    outside = tmp_path / "secret.pdf"
    outside.write_bytes(b"%PDF-1.4")
    with pytest.raises(Refusal) as caught:
        form.compose(template_text("qa_from_documents"), form.PageFields(uploads=[str(outside)]), settings)
    assert str(caught.value).startswith(f"{form.DOCS_LABEL}: this file was not uploaded")
    assert caught.value.fields == ("uploads",) and not list((tmp_path / "data").rglob("*.pdf"))
