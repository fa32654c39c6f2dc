"""The pre-flight check in a real browser: the Check button's report and histogram, Start refusing what the
check calls an error with the same words, the settings saved as YAML and loaded back into the form,
and the command preview following the fields."""

from __future__ import annotations

import re

import pytest

from tests.support.page_tools import dataset, set_number, shot

pytestmark = pytest.mark.slow


def _check(page) -> str:
    page.locator("#check").click()
    page.locator("#preflight-report .preflight").wait_for(timeout=90_000)
    return page.locator("#preflight-report").inner_text()


def test_check_reports_rows_truncation_steps_and_samples(page, datasets_dir, tmp_path):
    dataset(page, datasets_dir / "alpaca_en_demo.json")
    page.locator("#field-max_seq_length input").fill("128")
    page.locator("#field-max_seq_length input").press("Enter")
    text = _check(page)
    assert re.search(r"99\d training rows kept of 999 read", text), text[:400]
    assert "longer than Max seq length (128)" in text and re.search(r"\d+ steps \(\d+ per epoch", text)
    assert "Warning" in text and "set Max seq length to" in text  # > 5 % truncated, said with the label
    assert page.locator("#preflight-report .pf-sample").count() == 3
    assert page.locator("#preflight-report .pf-trained").count() >= 3
    layout = page.evaluate("""() => {
        const gd = document.querySelector('#preflight-lengths .js-plotly-plot');
        return {bars: gd.data[0].y.reduce((a, b) => a + b, 0), lines: (gd._fullLayout.shapes || []).map(s => s.x0)};
    }""")
    assert layout["bars"] == 999 and layout["lines"] == [128]
    shot(page, tmp_path, "preflight.png")


def test_start_refuses_what_the_check_calls_an_error(page, page_app, tmp_path, datasets_dir):
    """Max seq length 16 keeps only the template's system prompt of every row: nothing to train."""
    settings, runner, _ = page_app
    dataset(page, datasets_dir / "identity.json")
    page.locator("#field-max_seq_length input").fill("16")
    page.locator("#field-max_seq_length input").press("Enter")
    text = _check(page)
    assert "Error" in text and "refused" in text
    page.locator("#start").click()
    notice = page.locator("#start-notice .refusal")
    notice.wait_for(timeout=60_000)
    assert "Not started" in notice.inner_text()
    error_line = next(line for line in text.splitlines() if line.startswith("Error"))
    assert error_line.removeprefix("Error:").strip()[:40] in notice.inner_text()
    assert runner.status().phase.value in ("idle", "completed", "stopped", "error")
    assert not runner.status().is_training_running


def test_the_folded_report_describes_the_settings_started(page, page_app, datasets_dir):
    """Check, then a change (Max steps 8), then Start: the folded report is re-made for what was
    started, and its title says what it found (it kept the earlier Check's "No problems
    found ... 69 steps")."""
    _, runner, _ = page_app
    dataset(page, datasets_dir / "alpaca_en_demo.json")
    assert "No problems found" in _check(page)
    set_number(page, "max_steps", "8")
    page.locator("#start").click()
    title = page.locator("#preflight button.label-wrap")
    title.get_by_text("Pre-flight check of this run: 1 warning").wait_for(timeout=60_000)
    assert not page.locator("#preflight-report").is_visible()  # folded: the status and charts stay in view
    title.click()
    text = page.locator("#preflight-report").inner_text()
    assert "the run has 8 optimizer steps" in text, text[:600]
    runner.stop(save=False)
    assert runner.wait(30)


def test_yaml_save_load_and_command_preview(page, page_app, datasets_dir, tmp_path):
    dataset(page, datasets_dir / "identity.json")
    set_number(page, "learning_rate", "0.0007")
    page.locator("#field-learning_rate input").press("Tab")
    page.locator("#command-cli").get_by_text("--learning-rate 0.0007").first.wait_for(timeout=20_000)
    assert "--dataset" in page.locator("#command-cli").inner_text()
    assert "/api/train/start" in page.locator("#command-curl").inner_text()
    page.locator("#settings-save").click()
    link = page.locator("#settings-file a").first
    link.wait_for(timeout=20_000)
    with page.expect_download() as info:
        link.click()
    saved = tmp_path / "saved.yaml"
    info.value.save_as(saved)
    assert "learning_rate: 0.0007" in saved.read_text()
    page.reload()
    page.locator("#status").wait_for()
    assert page.locator("#train-paths textarea").input_value() == ""
    with page.expect_file_chooser() as chooser:
        page.locator("#settings-load").click()
    chooser.value.set_files(str(saved))
    page.wait_for_function(
        "() => document.querySelector('#train-paths textarea').value.endsWith('identity.json')", timeout=20_000
    )
    if not page.locator("#field-learning_rate").is_visible():
        page.locator("#section-training button.label-wrap").click()
    assert float(page.locator("#field-learning_rate input").input_value()) == pytest.approx(0.0007)
    page.locator("#preview-summary").get_by_text("(identity.json)").wait_for(timeout=60_000)  # the preview followed
