"""The page's data files and hints as a newcomer meets them, in a real browser (headless Chromium
driven by Playwright) on the app with ``fake_workers.page_worker``: a reload mid-run and a later
upload leave the preview, Check and Start reading the same files; every column mapping the page
suggests is one its field accepts; an untouched form's command shows no changed setting; GRPO's
learning rate is the one its help says; Evaluate's Max rows starts empty."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_for
from tests.support.page_tools import open_studio, wait_status
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import GRPO_LEARNING_RATE, short_number

pytestmark = pytest.mark.slow

SUMMARY = "#preview-summary"


def upload(page, path: Path, shows: str = "") -> None:
    """Choose ``path`` in the training upload box (clearing a file shown there first, as a user
    does) and wait for its preview, or for ``shows`` in it."""
    box = page.locator("#train-upload")
    if box.get_by_label("Clear").count():
        box.get_by_label("Clear").first.click()
    box.locator("input[type=file]").set_input_files(str(path))
    page.locator(SUMMARY).get_by_text(shows or f"({path.name})").first.wait_for(timeout=60_000)


def check_report(page) -> str:
    page.locator("#check").click()
    page.locator("#preflight-report").get_by_text("rows").first.wait_for(timeout=120_000)
    return page.locator("#preflight-report").inner_text()


def test_reload_mid_run_then_another_upload_preview_check_and_start_read_the_same_files(
    browser, page_app, datasets_dir
):
    """A run trained on an uploaded file; the page is reloaded mid-run: the file is back in the upload
    box, the paths box stays empty. Another upload replaces it: the preview, Check and Start all read
    that one file. A typed path beside the upload: the preview lists both, and Check reads both."""
    settings, runner, url = page_app
    runner.stop(save=False)
    runner.wait(20)
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    kept = settings.uploads_dir / "alpaca_en_demo-0123456789ab.json"
    shutil.copyfile(datasets_dir / "alpaca_en_demo.json", kept)
    assert runner.start(TrainingStartRequest(local_datasets=[str(kept)], max_steps=200)).status == "queued"
    page = open_studio(browser, url)
    try:
        page.locator(SUMMARY).get_by_text(f"({kept.name})").wait_for(timeout=120_000)
        assert page.locator("#train-paths textarea").input_value() == ""  # nothing added where no one chose it
        assert "alpaca_en_demo" in page.locator("#train-upload").inner_text()  # the file where it was chosen
        runner.stop(save=False)
        runner.wait(20)
        wait_status(page, "cancelled", 30_000)

        glaive = datasets_dir / "glaive_toolcall_en_demo.json"
        upload(page, glaive)
        summary = page.locator(SUMMARY).inner_text()
        assert "alpaca" not in summary and "Check and Start read" not in summary
        report = check_report(page)
        assert "glaive_toolcall_en_demo" in report and "alpaca" not in report
        page.locator("#start").click()
        wait_for(lambda: runner.status().is_training_running, 60, "a run")
        started = runner.store.get_run(runner.status().job_id).request["local_datasets"]
        assert [Path(p).name.startswith("glaive_toolcall_en_demo") for p in started] == [True], started
        runner.stop(save=False)
        runner.wait(20)
        wait_status(page, "cancelled", 30_000)

        typed = datasets_dir / "alpaca_en_demo.json"
        box = page.locator("#train-paths textarea")
        box.fill(str(typed))
        box.press("Enter")
        page.locator(SUMMARY).get_by_text("Check and Start read 2 files").wait_for(timeout=60_000)
        summary = page.locator(SUMMARY).inner_text()
        assert "glaive_toolcall_en_demo.json (uploaded)" in summary and "alpaca_en_demo.json" in summary
        report = check_report(page)
        assert "glaive_toolcall_en_demo" in report and "alpaca_en_demo" in report
    finally:
        page.close()


def suggestions(text: str) -> list[str]:
    """The mappings ``text`` suggests: what follows "e.g. " up to a ")", " (", ";" or the end."""
    return [m.strip().rstrip(".") for m in re.findall(r"e\.g\. (.+?)(?=\)| \(|;|$)", text, re.MULTILINE)]


def test_every_mapping_the_page_suggests_is_accepted_by_its_field(page, tmp_path):
    """A question,answer CSV: the preview's suggestion, the field's own help and the JSON and arrow
    forms each typed into *Custom format mapping* make the file readable as instruction / output."""
    csv = tmp_path / "qa.csv"
    csv.write_text("question,answer\nWhat is 2+2?,4\nCapital of France?,Paris\n", encoding="utf-8")
    upload(page, csv, "Cannot use this dataset")
    refused = page.locator(SUMMARY).inner_text()
    assert "Cannot use this dataset" in refused
    field = page.locator("#field-custom_format_mapping")
    if not field.is_visible():
        page.locator("#section-data button.label-wrap").click()
    help_text = field.inner_text()
    typed = suggestions(refused) + suggestions(help_text)
    assert len(typed) >= 2, (refused, help_text)
    typed += ['{"instruction": "question", "output": "answer"}', "instruction -> question, output -> answer"]
    box = field.locator("textarea")
    for text in typed:
        box.fill(text)
        box.press("Enter")
        page.locator(SUMMARY).get_by_text("Detected format").wait_for(timeout=60_000)
        assert "Cannot use" not in page.locator(SUMMARY).inner_text(), text
        box.fill("")
        box.press("Enter")
        page.locator(SUMMARY).get_by_text("Cannot use this dataset").wait_for(timeout=60_000)


def test_grpo_data_under_sft_is_named_and_an_untouched_form_changes_nothing(page, tmp_path):
    """Prompt + answer rows under sft: the preview says they look like GRPO data. An untouched form's
    command lists no setting and its curl body sends no number as text; choosing grpo fills the
    learning rate its help names; Evaluate's Max rows is empty, as its help says."""
    cli = page.locator("#command-cli").inner_text()
    curl = page.locator("#command-curl").inner_text()
    assert "--resources-per-worker" not in cli and '"1"' not in curl, (cli, curl)
    rows = tmp_path / "math.jsonl"
    rows.write_text('{"prompt": "What is 2+3?", "answer": "5"}\n{"prompt": "What is 4+4?", "answer": "8"}\n')
    upload(page, rows, "looks like GRPO data (prompts with answers")
    assert "Training method" in page.locator(SUMMARY).inner_text()  # the field by its label

    page.locator("#field-training_method input").click()
    page.get_by_role("option", name="grpo", exact=True).click()
    if not page.locator("#field-learning_rate").is_visible():
        page.locator("#section-training button.label-wrap").click()
    wait_for(
        lambda: float(page.locator("#field-learning_rate input").input_value() or 0) == GRPO_LEARNING_RATE,
        timeout_s=30,
        what="grpo's learning rate",
    )
    assert f"a GRPO run {short_number(GRPO_LEARNING_RATE)}" in page.locator("#field-learning_rate").inner_text()

    page.get_by_role("tab", name="Runs").click()
    page.locator("#evaluate-panel button.label-wrap").first.click()
    max_rows = page.locator("#eval-field-max_rows input")
    max_rows.wait_for(state="attached", timeout=30_000)
    assert max_rows.input_value() == "" and max_rows.get_attribute("placeholder") == "empty"
