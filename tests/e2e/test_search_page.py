"""The Search tab and an embedding run's share page in a real browser (headless Chromium via
Playwright) over the real chat engine and inference worker: a LoRA run of the tiny encoder with a
query prompt; the tab ranks typed passages with the run beside its base (scores and ranks equal to
``load_embedder``'s cosines of the prompted query), the share page ranks them the same way through
``/s/<token>/v1/embeddings``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.conftest import ServerThread, allowed, screenshot
from tests.support.embedding_runs import TEXTS, lora_embedding_run
from tests.support.page_tools import ARGS, CHROMIUM

pytestmark = [pytest.mark.slow, pytest.mark.browser]  # Chromium and the inference worker started here

EMB = "job_20250106_090000_4a4b4c4d"
PROMPT = "query: "
QUERY = "How can I change my password?"


def _expected(model, query: str) -> list[tuple[str, float]]:
    """(passage, cosine) best first, as the search must give them."""
    vectors = model.encode([query, *TEXTS])
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = vectors[1:] @ vectors[0]
    return [(TEXTS[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")]


def _table(text: str, columns: int) -> list[list[str]]:
    """The rows of a table's visible text (its label and header row left out; cells end at a line
    break or a tab)."""
    cells = [cell.strip() for cell in re.split(r"[\n\t]", text) if cell.strip()]
    cells = cells[cells.index("rank") + columns :]
    return [cells[i : i + columns] for i in range(0, len(cells), columns)]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_search_tab_and_share_page_rank_passages(tmp_path, tiny_encoder_dir):
    playwright = pytest.importorskip("playwright.sync_api")
    from server import build_app
    from trainer_core.kinds.embedding.loading import load_embedder
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", allowed_paths=allowed(tiny_encoder_dir.parent))
    app = build_app(settings)
    runner = app.state.runner
    folder = lora_embedding_run(tiny_encoder_dir, settings.runs_dir / EMB)
    request = {"model_name": str(tiny_encoder_dir), "is_embedding": True, "query_prompt": PROMPT}
    runner.store.create_run(EMB, request, str(folder), "loading_model")
    runner.store.finish_run(EMB, "completed", None, None)
    tuned = _expected(load_embedder(Path(folder)), PROMPT + QUERY)
    base = dict(_expected(load_embedder(tiny_encoder_dir), PROMPT + QUERY))
    link = app.state.share_links.create(EMB, None)
    with ServerThread(app) as server, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(server.url)
        page.get_by_role("tab", name="Search").click()
        chosen = page.locator("#search-model input")
        chosen.wait_for(timeout=30_000)
        page.wait_for_function(
            f"document.querySelector('#search-model input').value.includes('{EMB}')", timeout=30_000
        )  # the newest embedding run is chosen
        page.locator("#search-query textarea, #search-query input").first.fill(QUERY)
        page.locator("#search-passages textarea").fill("\n".join(TEXTS))
        page.locator("#search-run").click()
        page.locator("#search-state").get_by_text("ranked 4 passages").wait_for(timeout=120_000)
        assert "query prompt 'query: '" in page.locator("#search-state").inner_text()
        rows = _table(page.locator("#search-results").inner_text(), 6)
        assert [r[1] for r in rows] == [passage for passage, _ in tuned]
        assert [float(r[2]) for r in rows] == pytest.approx([s for _, s in tuned], abs=2e-4)
        assert [r[0] for r in rows] == ["1", "2", "3", "4"]
        assert [float(r[4]) for r in rows] == pytest.approx([base[r[1]] for r in rows], abs=2e-4)
        assert all(r[5] == "=" or r[5][0] in "▲▼" for r in rows)
        assert page.locator("#search-notice").inner_text().strip() == ""
        screenshot(page, tmp_path, "search-tab.png")

        page.goto(server.url.rstrip("/") + link.url_path)  # the share page: no login, the run alone
        page.locator("#query").fill(QUERY)
        page.locator("#passages").fill("\n".join(TEXTS))
        page.locator("#search").click()
        page.locator("#status").get_by_text("4 passages ranked").wait_for(timeout=60_000)
        shared = _table(page.locator("#results").inner_text(), 3)
        assert [r[1] for r in shared] == [passage for passage, _ in tuned]
        assert [float(r[2]) for r in shared] == pytest.approx([s for _, s in tuned], abs=2e-4)
        screenshot(page, tmp_path, "search-share-page.png")
        browser.close()
        app.state.engine.unload()
