"""A vision-language run from the page, in a real browser (headless Chromium via Playwright) on the
tiny Qwen2-VL: the image settings appear only once the model picker names a vision
model, the preview shows each row's images as thumbnails, Start trains 3 steps on ``mllm_demo.json``, and the
Chat tab takes an uploaded picture for that run (its box hidden for a text-only model) and answers
with the picture's tokens in the prompt."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import screenshot
from tests.support.page_tools import ARGS, CHROMIUM, open_studio, set_number, start_and_finish

pytestmark = [pytest.mark.slow, pytest.mark.browser]  # Chromium launched here, not by the fixture


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_train_and_chat_with_images_from_the_page(app_server, datasets_dir, tiny_vl_dir, tiny_model_dir, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    runner, url = app_server
    runner.wait(60)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = open_studio(browser, url)
        page.locator("#section-data button.label-wrap").click()
        page.locator("#field-format_type").wait_for(state="visible", timeout=30_000)
        assert page.locator("#field-is_dataset_image").is_hidden()  # the default model reads text only
        model = page.locator("#field-model_name input")
        model.fill(str(tiny_vl_dir))
        model.press("Enter")
        page.locator("#field-is_dataset_image").wait_for(state="visible", timeout=30_000)
        assert page.locator("#field-vision_image_size").is_visible()
        paths = page.get_by_label("...or dataset paths on the server")
        paths.fill(str(datasets_dir / "mllm_demo.json"))
        paths.press("Enter")
        page.locator("#preview-summary").get_by_text("(mllm_demo.json)").wait_for(timeout=60_000)
        assert "images" in page.locator("#preview-table thead").inner_text()
        assert "1.jpg" in page.locator("#preview-table").inner_text()
        thumbnail = page.locator("#preview-table img >> visible=true").first  # each row's pictures, small
        thumbnail.wait_for(timeout=30_000)
        assert thumbnail.get_attribute("src").startswith("data:image/jpeg;base64,")
        assert thumbnail.evaluate("img => img.naturalWidth") == 96
        set_number(page, "max_steps", "3")
        set_number(page, "batch_size", "2")
        job = start_and_finish(page, runner, steps=3)
        screenshot(page, tmp_path, "vision-run.png")

        page.get_by_role("tab", name="Chat").click()
        chosen = page.locator("#chat-model input")
        chosen.fill(job)
        chosen.press("Enter")
        image = page.locator("#chat-image")
        image.wait_for(state="visible", timeout=30_000)
        image.locator("input[type=file]").set_input_files(str(datasets_dir / "mllm_demo_data" / "2.jpg"))
        page.locator("#chat-image img").first.wait_for(timeout=30_000)
        message = page.locator("#chat-message textarea")
        message.fill("Who is he?")
        message.press("Enter")
        page.locator("#chat-state").get_by_text("is loaded").wait_for(timeout=120_000)
        page.wait_for_function("[...document.querySelectorAll('#chat-tuned .message')].length >= 2", timeout=120_000)
        assert "🖼️ Who is he?" in page.locator("#chat-tuned").inner_text()
        assert page.locator("#chat-notice").inner_text().strip() == ""
        page.locator("#chat-image img").first.wait_for(state="detached", timeout=30_000)  # it went with the message
        screenshot(page, tmp_path, "vision-chat.png")
        chosen.fill("base")
        chosen.press("Enter")  # the run's base is the same vision model: the box stays
        page.wait_for_timeout(1000)
        assert image.is_visible()
        browser.close()
    run = runner.store.list_runs()[0]
    assert run.request["model_name"] == str(tiny_vl_dir) and run.request["max_steps"] == 3
