"""A GRPO run from the page, in a real browser (headless Chromium via Playwright) on the tiny model
(the page is the point, not what a random model earns): choose GRPO (its settings and the reward
library appear, the preference ones stay hidden), pick two rewards from the library, type the
arithmetic prompts' path (the preview shows prompt and answer), press Start, and watch the rewards
chart (the weighted reward and each function), the completions chart and the sampled completions."""

from __future__ import annotations

import pytest

from bench.arith_prompts import write_rows
from tests.e2e.conftest import screenshot
from tests.support.page_tools import ARGS, CHROMIUM, open_studio, start_and_finish

pytestmark = [pytest.mark.slow, pytest.mark.browser]  # Chromium launched here, not by the fixture


def _pick(page, field: str, text: str) -> None:
    page.locator(f"#{field} input").click()
    page.locator("[role=option]").filter(has_text=text).first.click()


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_grpo_from_the_page_with_its_rewards_and_samples(app_server, tiny_model_dir, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    runner, url = app_server
    runner.wait(60)
    data = write_rows(tiny_model_dir.parent / "arith_page.json", count=12)  # an allowed folder of the shared app
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = open_studio(browser, url)
        assert page.locator("#field-num_generations").is_hidden() and page.locator("#reward-library").is_hidden()
        model = page.locator("#field-model_name input")
        model.fill(str(tiny_model_dir))
        model.press("Enter")
        _pick(page, "field-training_method", "grpo")
        page.locator("#field-num_generations").wait_for(state="visible", timeout=30_000)
        assert page.locator("#field-beta").is_visible() and page.locator("#field-loss_type").is_hidden()
        _pick(page, "reward-library", "numeric match")
        _pick(page, "reward-library", "length: closeness")
        rewards = page.locator("#field-rewards textarea")
        rewards.wait_for(state="visible")
        page.wait_for_function(
            "() => document.querySelector('#field-rewards textarea').value.split('\\n').length === 2", timeout=10_000
        )
        assert rewards.input_value() == "numeric_match weight=1.0\nlength weight=1.0 target_length=100"
        rewards.fill("numeric_match weight=1.0 column=answer\nlength weight=0.5 target_length=3")
        page.locator("#field-max_completion_length input").fill("4")
        paths = page.get_by_label("...or dataset paths on the server")
        paths.fill(str(data))
        paths.press("Enter")
        page.get_by_text("Detected format: prompt_only").wait_for(timeout=60_000)
        headers = page.locator("#preview-table thead").inner_text()
        assert all(name in headers for name in ("prompt", "answer", "op")), headers
        page.get_by_text("Hyperparameters").click()
        page.locator("#field-max_steps input").fill("2")
        start_and_finish(page, runner, steps=2)
        page.locator("#reward-plot").wait_for(state="visible", timeout=30_000)
        names = page.evaluate("""() => {
            const gd = document.querySelector('#reward-plot .js-plotly-plot');
            return gd && gd.data ? gd.data.map(t => t.name) : [];
        }""")
        assert names == ["reward", "length", "numeric_match:answer", "reward ± std"], names
        page.locator("#rollout-plot").wait_for(state="visible", timeout=10_000)
        table = page.locator("#grpo-samples table")
        table.wait_for(timeout=10_000)
        assert table.locator("tbody tr").count() == 4
        assert "numeric_match:answer" in table.locator("thead").inner_text()
        screenshot(page, tmp_path, "grpo-run.png")
        browser.close()
    run = runner.store.list_runs()[0]
    assert run.request["training_method"] == "grpo" and [r["name"] for r in run.request["rewards"]] == [
        "numeric_match",
        "length",
    ]
    assert run.request["rewards"][1]["weight"] == 0.5 and run.request["max_completion_length"] == 4
