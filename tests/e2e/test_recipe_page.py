"""The "Make a dataset from documents" panel in a real browser (headless Chromium via Playwright), from
the upload of a small PDF to a finished run and *Use this dataset* filling the Train form. The
writer is this studio's own /v1 serving the tiny model (a completed run holding a copy of it, a
real inference worker; its outputs are noise, so the counts, not the rows, are what is checked).
Kept cheap: 2-4 chunks of 96 tokens, 64 tokens an answer."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.e2e.conftest import ServerThread
from tests.support.documents import alpaca_paragraphs, write_pdf
from tests.support.page_tools import open_studio
from tests.support.recipe_server import RUN
from trainer_core.recipes.library import template_text
from trainer_core.recipes.output import DATA_FILE

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def recipe_app(tmp_path_factory, datasets_dir, tiny_model_dir):
    """(settings, url) of the whole app whose /v1 serves the tiny model as run ``RUN``."""
    from server import build_app
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path_factory.mktemp("recipe-page"), allowed_paths=str(tiny_model_dir.parent))
    runner = JobRunner(
        worker_target=fake_workers.page_worker, runs_dir=settings.runs_dir, store=RunStore(settings.db_path)
    )
    folder = settings.runs_dir / RUN
    shutil.copytree(tiny_model_dir, folder)
    runner.store.create_run(RUN, {"model_name": str(tiny_model_dir)}, str(folder), "completed")
    with ServerThread(build_app(settings, runner)) as server:
        yield settings, server.url.rstrip("/")
        runner.stop(save=False)
        runner.wait(10)


def test_upload_a_document_run_a_recipe_and_use_the_dataset(
    browser, recipe_app, datasets_dir, tiny_model_dir, tmp_path
):
    settings, url = recipe_app
    document = tmp_path / "notes.pdf"
    write_pdf(document, alpaca_paragraphs(datasets_dir, 2))
    page = open_studio(browser, url)
    try:
        page.locator("#section-recipes").get_by_text("Make a dataset from documents").first.click()
        endpoint = page.locator("#recipe-endpoint textarea, #recipe-endpoint input").first
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", endpoint.input_value())  # this studio's own /v1
        page.locator("#recipe-docs input[type=file]").set_input_files(str(document))
        page.locator("#recipe-template input").click()
        page.get_by_role("option", name="embedding_pairs").click()
        page.locator("#recipe-columns").get_by_text("query").first.wait_for(timeout=30_000)
        assert page.locator("#recipe-chunk input").input_value() == "256"  # the template's own chunking
        # answers of 16 tokens: the tiny model's noise then fits the length gate (300 characters)
        page.locator("#recipe-yaml .cm-content").click()
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(template_text("embedding_pairs").replace("max_tokens: 64", "max_tokens: 16"))
        page.locator("#recipe-columns").get_by_text("embedding_pairs (anchor, positive)").wait_for(timeout=30_000)
        page.locator("#recipe-tokenizer textarea, #recipe-tokenizer input").first.fill(str(tiny_model_dir))
        page.locator("#recipe-model textarea, #recipe-model input").first.fill(RUN)
        page.locator("#recipe-docs").get_by_text("KB").first.wait_for(timeout=30_000)  # uploaded (the name is cut)
        page.locator("#recipe-preview").click()
        estimate = page.locator("#recipe-estimate")
        estimate.get_by_text("Full run").wait_for(timeout=120_000)
        assert re.search(r"Preview: \d+ of [2-4] rows kept .* Full run: [2-4] records", estimate.inner_text())
        table = page.locator("#recipe-rows").inner_text()  # kept or dropped and why, then the columns
        assert all(name in table for name in ("kept", "why dropped", "chunk", "query")), table[:300]
        assert not (settings.data_dir / "recipes").exists()  # a preview writes nothing
        page.locator("#recipe-run").click()
        status = page.locator("#recipe-status")
        try:
            status.get_by_text("Dropped by gate").wait_for(timeout=240_000)
        finally:
            page.locator("#section-recipes").screenshot(path=str(tmp_path / "recipes.png"))
        text = status.inner_text()
        assert "completed" in text, text
        kept, made = map(int, re.search(r"(\d+) rows kept of (\d+) made", text).groups())
        assert 2 <= made <= 4 and 0 <= kept <= made, text
        assert page.locator("#recipe-notice").inner_text().strip() == ""
        page.locator("#recipe-card").get_by_text("Made by the data recipe").wait_for(timeout=30_000)
        assert re.search(r"notes-[0-9a-f]{12}\.pdf", page.locator("#recipe-card").inner_text())  # the kept upload
        link = page.locator(f'#recipe-download a[download$="-{DATA_FILE}"]')
        link.wait_for(timeout=30_000)
        downloaded = page.request.get(link.get_attribute("href")).body()
        page.locator("#recipe-use").click()
        paths = page.locator("#train-paths textarea")
        page.wait_for_function(
            "() => document.querySelector('#train-paths textarea').value.endsWith('/data.jsonl')", timeout=30_000
        )
        folder = settings.data_dir / "recipes"
        (result,) = [p for p in folder.iterdir() if p.is_dir()]
        assert paths.input_value() == str((result / DATA_FILE).resolve())
        assert len((result / DATA_FILE).read_text().splitlines()) == kept
        assert downloaded == (result / DATA_FILE).read_bytes()
        assert "Train form now trains on" in page.locator("#recipe-notice").inner_text()
        page.locator("#preview-summary").get_by_text(DATA_FILE).first.wait_for(timeout=60_000)
    finally:
        page.close()
