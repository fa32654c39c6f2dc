"""Paths through a real browser (headless Chromium driven by Playwright) with the real model; the
newcomer's whole walk (upload, fill, check, train, export, evaluate, chat, compare) is
``test_newcomer.py``."""

from __future__ import annotations

import shutil

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]  # Chromium launched here, not by the fixture
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_conversations_that_open_with_the_assistant_train_every_assistant_turn(
    app_server, studio_settings, model_dir, tmp_path
):
    """Through the page with the real model: rows whose first turn is the
    assistant's (some with no other assistant turn) are previewed turn by turn and trained, none
    dropped, and the leading turns' tokens count as trained."""
    import json

    playwright = pytest.importorskip("playwright.sync_api")
    runner, url = app_server
    runner.wait(60)
    greeting = {"from": "gpt", "value": "Hello! I am Quill, the studio's writing helper. What are we writing today?"}
    rows = [
        {
            "conversations": [
                greeting,
                {"from": "human", "value": f"A title for story {i}?"},
                {"from": "gpt", "value": f"The Lantern of Harbour {i}."},
            ]
        }
        for i in range(4)
    ]
    rows += [{"conversations": [{"from": "gpt", "value": f"Tip {i}: write a little every day."}]} for i in range(4)]
    path = studio_settings.data_dir / "assistant_first.json"
    path.write_text(json.dumps(rows))
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(url)
        box = page.locator("#train-paths textarea")
        box.fill(str(path))
        box.press("Enter")
        page.locator("#preview-summary").get_by_text("(assistant_first.json)").wait_for(timeout=60_000)
        assert "8" in page.locator("#preview-summary").inner_text()
        first_cell = page.locator("#preview-table [data-testid='cell-0-1']").first.inner_text()
        assert first_cell.strip().startswith("assistant:") and "user:" in first_cell
        page.locator("#section-training button.label-wrap").click()
        for field, value in (("max_steps", "1"), ("batch_size", "8")):
            page.locator(f"#field-{field} input").fill(value)
        page.locator("#field-max_seq_length input").fill("128")
        page.locator("#start").click()
        page.wait_for_function(
            "() => /^completed · step 1 \\/ 1/.test(document.querySelector('#status').innerText.trim())",
            timeout=300_000,
        )
        details = runner.status().details
        browser.close()
    assert details["rows"] == 8 and details["dropped_rows"] == 0
    from transformers import AutoTokenizer

    from trainer_core.data.tokenization import render_with_spans

    tokenizer = AutoTokenizer.from_pretrained(runner.status().details["output_dir"])
    messages = [{"role": "assistant", "content": rows[4]["conversations"][0]["value"]}]
    text, spans = render_with_spans(messages, tokenizer)
    assert len(spans) == 1 and text[spans[0][0] : spans[0][1]] == messages[0]["content"] + "<|im_end|>"
