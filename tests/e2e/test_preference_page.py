"""A DPO run from the page, in a real browser (headless Chromium via Playwright) on the tiny model
(typed as the model; the page is the point, not the rewards' values): choose the method (its own settings appear, the other methods' stay hidden), type the preference
file's path (the preview shows prompt / chosen / rejected), press Start, watch the rewards chart."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import screenshot
from tests.support.page_tools import ARGS, CHROMIUM, open_studio, start_and_finish

pytestmark = [pytest.mark.slow, pytest.mark.browser]  # Chromium launched here, not by the fixture


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_dpo_from_the_page_with_its_rewards_chart(app_server, datasets_dir, tiny_model_dir, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    runner, url = app_server
    runner.wait(60)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = open_studio(browser, url)
        assert page.locator("#field-beta").is_hidden() and page.locator("#field-desirable_weight").is_hidden()
        model = page.locator("#field-model_name input")
        model.fill(str(tiny_model_dir))
        model.press("Enter")
        page.locator("#field-training_method input").click()
        page.locator("[role=option]").filter(has_text="dpo").first.click()
        page.locator("#field-beta").wait_for(state="visible", timeout=30_000)
        assert page.locator("#field-loss_type").is_visible() and page.locator("#field-desirable_weight").is_hidden()
        paths = page.get_by_label("...or dataset paths on the server")
        paths.fill(str(datasets_dir / "dpo_en_demo.json"))
        paths.press("Enter")
        page.get_by_text("Detected format: preference").wait_for(timeout=60_000)
        headers = page.locator("#preview-table thead").inner_text()
        assert all(name in headers for name in ("prompt", "chosen", "rejected")), headers
        page.get_by_text("Hyperparameters").click()
        for field, value in (("max_steps", "2"), ("batch_size", "2"), ("learning_rate", "0.00005")):
            page.locator(f"#field-{field} input").fill(value)
        page.locator("#field-max_seq_length input").fill("256")
        start_and_finish(page, runner, steps=2)
        page.locator("#reward-plot").wait_for(state="visible", timeout=30_000)
        names = page.evaluate("""() => {
            const gd = document.querySelector('#reward-plot .js-plotly-plot');
            return gd && gd.data ? gd.data.map(t => t.name) : [];
        }""")
        assert names == ["chosen", "rejected", "margins", "accuracies"], names
        screenshot(page, tmp_path, "dpo-run.png")
        browser.close()
    run = runner.store.list_runs()[0]
    assert run.request["training_method"] == "dpo" and run.request["max_steps"] == 2
    assert run.request["model_name"] == str(tiny_model_dir)
