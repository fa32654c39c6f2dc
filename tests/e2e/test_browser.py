"""A person's path through a real browser (headless Chromium driven by Playwright): type a dataset
path, see the preview, set steps, press Start, watch it complete, find the run on the Runs tab,
chat with it."""

from __future__ import annotations

import shutil

import pytest

from tests.e2e.conftest import screenshot

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
def test_train_from_the_page_and_find_the_run(app_server, datasets_dir, model_dir, tmp_path):
    """The form's default model: the real SmolLM2 (``model_dir``)."""
    playwright = pytest.importorskip("playwright.sync_api")
    runner, url = app_server
    runner.wait(60)
    shots = tmp_path
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(url)
        paths = page.get_by_label("...or dataset paths on the server")
        paths.fill(str(datasets_dir / "identity.json"))
        paths.press("Enter")
        page.get_by_text("Detected format:").wait_for(timeout=30_000)
        assert "alpaca" in page.get_by_text("Detected format:").inner_text()
        page.get_by_text("Hyperparameters").click()
        for field, value in (("max_steps", "2"), ("batch_size", "2")):
            page.locator(f"#field-{field} input").fill(value)
        page.locator("#field-max_seq_length input").fill("128")
        page.locator("#start").click()
        page.wait_for_function(
            "() => /^completed · step 2 \\/ 2/.test(document.querySelector('#status').innerText.trim())",
            timeout=300_000,
        )  # this run's end, not the last run's
        screenshot(page, shots, "train-real-model.png")
        job_id = runner.status().job_id
        page.get_by_role("tab", name="Runs").click()
        page.get_by_text(job_id, exact=True).filter(visible=True).first.wait_for(timeout=30_000)
        page.get_by_text(job_id, exact=True).filter(visible=True).first.click()
        page.get_by_text(f"**{job_id}**").or_(page.get_by_text(f"{job_id} ·")).first.wait_for(timeout=30_000)
        page.locator("#chat-with-run").click()
        page.locator("#chat-message textarea").wait_for(timeout=30_000)
        page.locator("#chat-message textarea").fill("Who are you?")
        page.locator("#chat-message textarea").press("Enter")
        answer = page.locator("#chat-tuned .bot, #chat-tuned [data-testid='bot']").first
        answer.wait_for(timeout=120_000)
        page.locator("#chat-state").get_by_text("is loaded").wait_for(timeout=120_000)
        page.wait_for_function(
            "[...document.querySelectorAll('#chat-tuned .message')].pop().innerText.trim().length > 8", timeout=120_000
        )
        page.screenshot(path=str(shots / "chat.png"))
        assert "Who are you?" in page.locator("#chat-tuned").inner_text()
        browser.close()


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_export_and_evaluate_a_run_from_the_runs_tab(app_server, datasets_dir, tiny_model_dir, tmp_path):
    """A run of its own (the tiny model, 2 steps): export its adapter and evaluate it on 4 held-out
    rows from the Runs tab; the export's download link serves the zip, the scores and the table
    appear."""
    from trainer_core.schemas import Phase, TrainingStartRequest

    playwright = pytest.importorskip("playwright.sync_api")
    runner, url = app_server
    runner.wait(60)
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        max_steps=2,
        batch_size=2,
        max_seq_length=64,
    )
    job_id = runner.start(request).job_id
    assert runner.wait(300) and runner.status().phase == Phase.completed, runner.status().error
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(url)
        page.get_by_role("tab", name="Runs").click()
        page.get_by_text(job_id, exact=True).filter(visible=True).first.click()
        page.get_by_text(f"{job_id} ·").first.wait_for(timeout=30_000)
        page.locator("#export-panel").get_by_text("Export", exact=True).first.click()
        page.locator("#export-start").click()
        page.locator("#export-status").get_by_text("completed").wait_for(timeout=180_000)
        link = page.locator("#export-links a").first
        link.wait_for(timeout=30_000)
        assert link.inner_text().endswith(".zip")
        download = page.request.get(url.rstrip("/") + link.get_attribute("href"))
        assert download.ok and download.body()[:2] == b"PK"
        assert "3/3 prompts" in page.locator("#export-table").inner_text()
        page.locator("#evaluate-panel").get_by_text("Evaluate", exact=True).first.click()
        page.get_by_label("...or held-out dataset paths on the server").fill(str(datasets_dir / "identity.json"))
        page.locator("#eval-field-max_rows input").fill("4")
        page.locator("#eval-field-max_new_tokens input").fill("16")
        page.locator("#eval-start").click()
        page.locator("#eval-status").get_by_text("completed").wait_for(timeout=240_000)
        scores = page.locator("#eval-scores").inner_text()
        assert "ROUGE-L" in scores and "4 of 91 rows" in scores
        assert "reference" in page.locator("#eval-table").inner_text()
        page.screenshot(path=str(tmp_path / "evaluate.png"), full_page=True)
        browser.close()


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_conversations_that_open_with_the_assistant_train_every_assistant_turn(
    app_server, studio_settings, model_dir, tmp_path
):
    """Issue 11 item 7, through the page with the real model: rows whose first turn is the
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
