"""What the page shows, in a real browser (headless Chromium driven by Playwright), for each state a
user meets: refusals beside the button with the field marked, buttons per phase, honest charts,
delete, reload mid-run, Load settings, stopped vs cancelled, training vs wall time, the sticky
monitor, readable help, the Runs table's columns, the preview and the hardware panel.

The app is the real one (admission, run history, UI) with ``fake_workers.page_worker`` standing in
for training, so every state is reached in seconds. Screenshots of the main states are written to
the test's tmp folder, and to ``docs/screenshots/`` when STUDIO_UPDATE_SCREENSHOTS=1."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_for
from tests.support.page_tools import (
    dataset,
    enabled,
    figure,
    set_number,
    shot,
    start_job,
    status_text,
    table_rows,
    wait_status,
)
from trainer_core.data.fill import fill_record
from trainer_core.fieldmeta import default

pytestmark = pytest.mark.slow


def test_refused_start_is_said_beside_the_button_and_the_monitor_keeps_the_job(page, page_app, datasets_dir, tmp_path):
    """Item 1: no dataset after a completed run, then a Start from a tab that was idle while another
    job started: a notice by the button (and a toast), the run's status and charts untouched."""
    _, runner, url = page_app
    dataset(page, datasets_dir / "identity.json")
    set_number(page, "max_steps", "4")
    page.locator("#start").click()
    wait_status(page, "completed", 60_000)
    before = figure(page, "loss-plot")
    assert before["traces"] == 1
    page.locator("#train-paths textarea").fill("")
    page.locator("#start").click()
    notice = page.locator("#start-notice .refusal")
    notice.wait_for(timeout=30_000)
    assert "Training dataset" in notice.inner_text() and "local_datasets" not in notice.inner_text()
    page.locator(".toast-body, [data-testid='toast-body']").first.wait_for(timeout=10_000)
    assert status_text(page).startswith("completed") and figure(page, "loss-plot") == before
    assert page.locator("#monitor-col .error").count() == 0  # no red "Error" badges
    assert page.locator("#start").is_enabled() and page.locator("#start").inner_text() == "Start"
    shot(page, tmp_path, "refused-start.png")

    job_id = start_job(runner, datasets_dir, max_steps=80)  # another user's job; this tab is idle
    dataset(page, datasets_dir / "identity.json")
    page.locator("#start").click()
    page.locator("#start-notice").get_by_text("already in progress").wait_for(timeout=30_000)
    wait_status(page, "training", 30_000)  # now follows that job
    assert runner.status().job_id == job_id and runner.status().is_training_running
    assert page.locator("#monitor-col .error").count() == 0


def test_errors_use_the_on_screen_label_and_mark_the_field(page, datasets_dir):
    """Item 2: a bad value in a closed section opens it, marks the field, names it by its label, and
    the message stays after the toast is gone."""
    dataset(page, datasets_dir / "identity.json")
    page.locator("#field-max_seq_length input").fill("8")
    page.locator("#start").click()
    notice = page.locator("#start-notice .refusal")
    notice.wait_for(timeout=30_000)
    text = notice.inner_text()
    assert "Max seq length" in text and "max_seq_length" not in text
    wait_for(
        lambda: "field-invalid" in (page.locator("#field-max_seq_length").get_attribute("class") or ""),
        timeout_s=10,
        what="the field marked",
    )
    page.locator("#field-max_seq_length input").fill("128")
    set_number(page, "learning_rate", "1.5")
    page.locator("#section-training button.label-wrap").click()  # close the section again
    page.locator("#start").click()
    page.locator("#start-notice").get_by_text("Learning rate").wait_for(timeout=30_000)
    wait_for(
        lambda: (
            page.locator("#field-learning_rate").is_visible()
            and "field-invalid" in (page.locator("#field-learning_rate").get_attribute("class") or "")
        ),
        timeout_s=10,
        what="the closed section opened and the field marked",
    )
    assert "field-invalid" not in (page.locator("#field-max_seq_length").get_attribute("class") or "")
    time.sleep(6)  # longer than a toast lives
    assert "Learning rate" in page.locator("#start-notice").inner_text()


def test_ray_settings_show_with_compute_ray_and_an_address_nobody_answers_is_refused(page, datasets_dir):
    """The Ray settings are hidden while Compute is local, shown once it is ray; Start with
    an address where nothing listens is refused beside the button naming the field by its label."""
    from tests.e2e.conftest import free_port

    dataset(page, datasets_dir / "identity.json")
    page.locator("#section-distributed button.label-wrap").click()
    page.locator("#field-compute").wait_for(state="visible", timeout=30_000)
    assert page.locator("#field-ray_address").is_hidden() and page.locator("#field-num_workers").is_hidden()
    page.locator("#field-compute input").click()
    page.get_by_role("option", name="ray", exact=True).click()
    page.locator("#field-ray_address").wait_for(state="visible", timeout=30_000)
    assert page.locator("#field-resources_per_worker").is_visible() and page.locator("#field-use_gpu").is_visible()
    assert (
        page.locator("#field-resources_per_worker textarea, #field-resources_per_worker input").first.input_value()
        == "CPU=1"
    )
    address = page.locator("#field-ray_address textarea, #field-ray_address input").first
    address.fill(f"127.0.0.1:{free_port()}")
    page.locator("#start").click()
    notice = page.locator("#start-notice .refusal")
    notice.wait_for(timeout=30_000)
    assert "Ray address" in notice.inner_text() and "nothing answers" in notice.inner_text(), notice.inner_text()
    page.locator("#field-compute input").click()
    page.get_by_role("option", name="local", exact=True).click()
    page.locator("#field-ray_address").wait_for(state="hidden", timeout=30_000)


def test_embedding_options_show_only_for_an_embedding_run(page):
    """*Embedding options* are hidden for the default text model, shown once *Train as an embedding
    model* says yes (their loss offers "automatic" and sentence-transformers' losses), hidden again at no."""
    section = page.locator("#section-embedding")
    assert section.is_hidden()
    page.locator("#section-model button.label-wrap").click()
    page.locator("#field-is_embedding input").click()
    page.get_by_role("option", name="yes", exact=True).click()
    section.wait_for(state="visible", timeout=30_000)
    section.locator("button.label-wrap").click()
    page.locator("#field-embedding_loss input").click()
    options = [text.split("\n")[-1] for text in page.get_by_role("option").all_inner_texts()]  # "✓\nautomatic": chosen
    assert options[:2] == ["automatic", "MultipleNegativesRankingLoss"] and "CoSENTLoss" in options, options
    page.keyboard.press("Escape")
    page.locator("#field-is_embedding input").click()
    page.get_by_role("option", name="no", exact=True).click()
    section.wait_for(state="hidden", timeout=30_000)


def test_buttons_follow_the_phase_and_no_gradio_overlay_sits_on_the_monitor(page, page_app, datasets_dir, tmp_path):
    """Item 9: Start only when idle (disabled at once while starting), Stop only while training,
    Cancel while live; Gradio's progress overlay never shows on the monitor."""
    _, runner, _ = page_app
    assert enabled(page) == {"start": True, "stop": False, "cancel": False}
    dataset(page, datasets_dir / "identity.json")
    set_number(
        page, "max_steps", "2000"
    )  # cancelled below; long enough that a slow, loaded browser still finds it live
    page.locator("#start").click()
    seen_loading = False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not status_text(page).startswith("training"):
        status, buttons = page.evaluate("""() => [document.querySelector('#status').innerText.trim(),
            ['start', 'stop', 'cancel'].map(id => !document.getElementById(id).disabled)]""")  # one snapshot
        if status.startswith("loading_model"):
            seen_loading = True
            assert buttons == [False, False, True], buttons
        time.sleep(0.05)
    assert seen_loading
    wait_for(
        lambda: enabled(page) == {"start": False, "stop": True, "cancel": True}, timeout_s=10, what="training buttons"
    )
    overlays = page.locator("#monitor-col [data-testid='status-tracker']").filter(visible=True)
    for _ in range(10):
        assert (
            overlays.count() == 0
            and "ETA" not in page.locator("#monitor-col .eta-bar, #monitor-col .progress-text").all_inner_texts()
        )
        time.sleep(0.2)
    wait_for(lambda: runner.status().details.get("step", 0) >= 8, timeout_s=30, what="step 8")
    shot(page, tmp_path, "train-running.png")
    page.locator("#cancel").click()
    wait_status(page, "cancelled", 30_000)
    wait_for(
        lambda: enabled(page) == {"start": True, "stop": False, "cancel": False}, timeout_s=10, what="idle buttons"
    )


def test_charts_have_integer_steps_sane_single_points_and_an_empty_state(browser, page_app, datasets_dir, tmp_path):
    """Item 8: before any step the charts say "no steps yet"; one step gives a learning-rate axis
    around the default learning rate; step ticks are integers; each title shows once."""
    settings, runner, url = page_app
    runner.stop(save=False)
    runner.wait(20)
    runner.reset()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    wait_status(page, "idle", 30_000)
    wait_for(
        lambda: (figure(page, "lr-plot") or {}).get("annotations") == ["no steps yet"], timeout_s=20, what="empty chart"
    )
    empty = figure(page, "loss-plot")
    assert empty["traces"] == 0 and empty["x_visible"] is False
    assert page.locator("#monitor-col").get_by_text("Learning rate", exact=True).count() == 1  # title once
    dataset(page, datasets_dir / "identity.json")
    set_number(page, "max_steps", "9")
    page.locator("#start").click()
    wait_for(lambda: (figure(page, "lr-plot") or {}).get("traces") == 1, timeout_s=30, what="first point")
    one = figure(page, "lr-plot")
    low, high = one["y_range"]
    peak = default("learning_rate")  # step 1 of a cosine schedule without warm-up logs about the peak
    assert low < peak < high and low > 0 and [low, high] != [-1, 1]
    wait_status(page, "completed", 60_000)
    for chart in ("loss-plot", "lr-plot", "grad-plot"):
        ticks = figure(page, chart)["x_ticks"]
        assert ticks and all(float(t).is_integer() for t in ticks), (chart, ticks)
    assert "step 9 / 9" in status_text(page)
    shot(page, tmp_path, "train-completed.png")
    page.close()


def test_stop_and_cancel_are_told_apart_and_times_continue_over_resume(page, page_app, datasets_dir, tmp_path):
    """Items 5 and 6: Stop (save) ends ``stopped``, Cancel ``cancelled``, in the status, the Runs
    table and the API; after a Resume the training time continues and the wall time includes the
    idle gap."""
    import httpx

    _, runner, url = page_app
    dataset(page, datasets_dir / "identity.json")
    set_number(page, "max_steps", "40")
    page.locator("#start").click()
    wait_for(lambda: runner.status().details.get("step", 0) >= 6, timeout_s=30, what="step 6")
    page.locator("#stop").click()
    wait_status(page, "stopped", 30_000)
    stopped = runner.status()
    saved_id, training_at_stop = stopped.job_id, stopped.details["elapsed_seconds"]
    assert stopped.details["end_reason"] == "stopped"
    time.sleep(3)  # the idle gap

    page.locator("#start").click()  # a second run, cancelled
    wait_for(
        lambda: runner.status().details.get("step", 0) >= 2 and runner.status().job_id != saved_id,
        timeout_s=30,
        what="second run",
    )
    page.locator("#cancel").click()
    wait_status(page, "cancelled", 30_000)
    cancelled_id = runner.status().job_id

    page.get_by_role("tab", name="Runs").click()
    table = page.locator("#runs-table")
    table.get_by_text(cancelled_id, exact=True).filter(visible=True).first.wait_for(timeout=30_000)
    rows = {r[0]: r for r in table_rows(page, "runs-table")}
    assert rows[cancelled_id][3] == "cancelled" and rows[saved_id][3] == "stopped"
    runs = {r["job_id"]: r for r in httpx.get(url + "api/train/runs", timeout=30).json()}
    assert runs[saved_id]["phase"] == "stopped" and runs[saved_id]["end_reason"] == "stopped"
    assert runs[cancelled_id]["phase"] == "stopped" and runs[cancelled_id]["end_reason"] == "cancelled"

    table.get_by_text(saved_id, exact=True).filter(visible=True).first.click()
    page.locator("#run-summary").get_by_text(saved_id).first.wait_for(timeout=30_000)
    page.locator("#resume").click()
    wait_status(page, "training", 30_000)
    wait_for(lambda: runner.status().details.get("step", 0) >= 10, timeout_s=30, what="resumed steps")
    details = runner.status().details
    assert details["elapsed_seconds"] > training_at_stop  # continued, not reset
    assert details["wall_seconds"] >= details["elapsed_seconds"] + 3  # the gap counts in wall time only
    text = status_text(page)
    assert re.search(r"training \d+m \d\ds · wall \d+m \d\ds", text), text
    runner.stop(save=False)
    runner.wait(20)


def test_delete_clears_the_run_view_and_its_confirmation_can_be_cancelled(page, page_app, datasets_dir, tmp_path):
    """Item 3 and the Runs table: columns, Refresh, Delete's Cancel, nothing of a deleted run left."""
    _, runner, _ = page_app
    job_id = start_job(runner, datasets_dir, max_steps=3)
    assert runner.wait(30)
    page.get_by_role("tab", name="Runs").click()
    page.locator("#runs-refresh").click()
    table = page.locator("#runs-table")
    table.get_by_text(job_id, exact=True).filter(visible=True).first.wait_for(timeout=30_000)
    header = table.locator("thead").first.inner_text()
    for column in ("model", "dataset", "method", "tokens/s", "training time", "wall time"):
        assert column in header, header
    row = next(r for r in table_rows(page, "runs-table") if r[0] == job_id)
    assert row[4:7] == ["SmolLM2-135M-Instruct", "identity.json", "lora"], row
    table.get_by_text(job_id, exact=True).filter(visible=True).first.click()
    page.locator("#run-summary").get_by_text(job_id).first.wait_for(timeout=30_000)
    wait_for(lambda: (figure(page, "run-loss-plot") or {}).get("traces") == 1, timeout_s=20, what="run chart")
    page.locator("#delete").click()
    shot(page, tmp_path, "runs-delete.png")
    page.locator("#delete-cancel").click()
    page.locator("#delete-confirm").wait_for(state="hidden", timeout=10_000)
    assert runner.store.get_run(job_id) is not None
    page.locator("#delete").click()
    page.locator("#delete-confirm").click()
    page.locator("#run-summary").get_by_text("Click a run in the table").wait_for(timeout=30_000)
    assert page.locator("#run-id textarea, #run-id input").first.input_value() == ""
    assert job_id not in page.locator("#runs-table").inner_text()
    assert not (figure(page, "run-loss-plot") or {}).get("traces")
    assert runner.store.get_run(job_id) is None
    assert not page.locator("#resume").is_enabled() and not page.locator("#delete").is_enabled()


def test_reload_mid_run_shows_the_running_jobs_settings_and_data(browser, page_app, datasets_dir):
    """Item 4: a page opened while a job trains shows that job's dataset, settings and preview."""
    _, runner, url = page_app
    runner.stop(save=False)
    runner.wait(20)
    start_job(runner, datasets_dir, max_steps=200, max_seq_length=256, learning_rate=5e-4)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.locator("#preview-summary").get_by_text("Detected format").wait_for(timeout=60_000)
    shown = page.locator("#train-paths textarea").input_value()  # as the job has it (CI lays ../shared as a link)
    assert os.path.realpath(shown) == os.path.realpath(datasets_dir / "identity.json")
    assert page.locator("#field-max_seq_length input").input_value() == "256"
    assert "91" in page.locator("#preview-summary").inner_text()
    # The form was filled from the running job at load; end the job before opening the closed
    # section so the charts' redraws (four a second) cannot starve the click on a loaded CI machine.
    runner.stop(save=False)
    runner.wait(20)
    wait_status(page, "cancelled", 30_000)
    page.locator("#section-training button.label-wrap").click()
    page.locator("#field-learning_rate input").wait_for(timeout=30_000)
    assert float(page.locator("#field-learning_rate input").input_value()) == 5e-4
    assert page.locator("#field-max_steps input").input_value() == "200"
    page.close()


def test_load_settings_refreshes_the_preview(page, page_app, datasets_dir):
    """Item 10: Load settings fills the form and shows the run's dataset in the preview."""
    _, runner, _ = page_app
    from trainer_core.schemas import TrainingStartRequest

    response = runner.start(
        TrainingStartRequest(local_datasets=[str(datasets_dir / "alpaca_en_demo.json")], max_steps=2)
    )
    assert runner.wait(30)
    page.get_by_role("tab", name="Runs").click()
    page.locator("#runs-refresh").click()
    page.locator("#runs-table").get_by_text(response.job_id, exact=True).filter(visible=True).first.click()
    page.locator("#run-summary").get_by_text(response.job_id).first.wait_for(timeout=30_000)
    page.locator("#load-settings").click()
    page.locator("#preview-summary").get_by_text("alpaca_en_demo.json").wait_for(timeout=60_000)
    assert "999" in page.locator("#preview-summary").inner_text()


def test_preview_turns_rows_truncation_and_placeholders(page, datasets_dir, tmp_path):
    """The preview: multi-turn chats as turns, the row count, rows over Max seq length, and a
    placeholder warning with the fix."""
    dataset(page, datasets_dir / "identity.json", as_is=False)
    summary = page.locator("#preview-summary").inner_text()
    assert "91 rows" in summary and "{{name}} in 77 rows" in summary and "Fill in" in summary
    page.locator("#field-max_seq_length input").fill("64")
    page.locator("#field-max_seq_length input").press("Enter")
    page.locator("#preview-summary").get_by_text("longer than Max seq length (64 tokens)").wait_for(timeout=30_000)
    shot(page, tmp_path, "preview.png")
    page.locator("#field-max_seq_length input").fill("512")
    dataset(page, datasets_dir / "glaive_toolcall_en_demo.json")  # ShareGPT with tools, multi-turn
    cell = table_rows(page, "preview-table")[0][1]
    assert cell.count("user:") + cell.count("assistant:") >= 2 and "\n" in cell.strip(), cell


def test_layout_sticky_monitor_readable_help_hardware_and_model_picker(page, page_app, tmp_path):
    """The monitor stays in view while the form scrolls; help text is >= 14 px with WCAG AA
    contrast (>= 4.5:1); the hardware panel is live; the model picker lists the bundled model."""
    hardware = page.locator("#hardware")
    hardware.get_by_text("CPU").wait_for(timeout=20_000)
    assert "RAM" in hardware.inner_text() and "GiB" in hardware.inner_text()
    first = hardware.inner_text()
    page.mouse.wheel(0, 1500)
    time.sleep(0.8)
    top = page.locator("#monitor-col").evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top <= 40, top
    assert page.evaluate("window.scrollY") > 500
    wait_for(lambda: hardware.inner_text() != first or "CPU" in hardware.inner_text(), timeout_s=10, what="hardware")
    contrast = page.evaluate("""() => {
        const lum = c => { const [r, g, b] = c.match(/\\d+/g).slice(0, 3).map(v => { v /= 255;
            return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
            return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
        const bg = e => { for (; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor;
            if (c && !c.endsWith(', 0)') && c !== 'transparent') return c; } return 'rgb(255, 255, 255)'; };
        return [...document.querySelectorAll('.info-text')].filter(e => e.offsetParent).map(e => {
            const a = lum(getComputedStyle(e).color), b = lum(bg(e));
            return [(Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), parseFloat(getComputedStyle(e).fontSize)]; });
    }""")
    assert contrast and all(ratio >= 4.5 and size >= 14 for ratio, size in contrast), contrast
    page.mouse.wheel(0, -3000)
    page.locator("#field-model_name input").click()
    options = page.get_by_role("option").all_inner_texts()
    assert any("bundled" in o for o in options), options
    page.keyboard.press("Escape")
    shot(page, tmp_path, "train-idle.png")


def test_a_run_selected_while_it_trains_shows_its_end_without_another_click(page, page_app, datasets_dir, tmp_path):
    """The Runs tab's view follows the selected run: when it completes, its summary, buttons and
    the weights to export appear by themselves."""
    _, runner, _ = page_app
    job_id = start_job(runner, datasets_dir, max_steps=160)  # 40 s: the clicks below fit under load (80 did not once)
    page.get_by_role("tab", name="Runs").click()
    page.locator("#runs-refresh").click()
    table = page.locator("#runs-table")
    table.get_by_text(job_id, exact=True).filter(visible=True).first.wait_for(timeout=30_000)
    table.get_by_text(job_id, exact=True).filter(visible=True).first.click()
    page.locator("#run-summary").get_by_text(job_id).first.wait_for(timeout=30_000)
    page.locator("#export-panel").get_by_text("Export").first.click()
    weights = page.locator("#export-weights input")
    assert runner.status(with_history=False).is_training_running and weights.input_value() == ""
    assert runner.wait(180)
    page.locator("#run-summary").get_by_text("completed").first.wait_for(timeout=20_000)
    page.wait_for_function(
        "() => (document.querySelector('#export-weights input') || {value: ''}).value.includes('final')",
        timeout=20_000,
    )
    assert page.locator("#chat-with-run").is_enabled() and page.locator("#delete").is_enabled()
    assert "step 160 / 160" in page.locator("#run-summary").inner_text()
    shot(page, tmp_path, "runs-follow.png")


def test_placeholders_are_filled_on_the_page(page, page_app, datasets_dir, tmp_path):
    """Item 1: a field per placeholder under the preview; Start refuses while they remain; Fill in
    puts a filled copy in the upload box (identity.json untouched), the preview shows the values,
    and the run trains on the copy, whose run.json records them."""
    settings, runner, _ = page_app
    source = datasets_dir / "identity.json"
    before = source.read_bytes()
    dataset(page, source, as_is=False)
    assert page.locator("#placeholder-0 label").inner_text().strip() == "Value for {{author}}"
    assert page.locator("#placeholder-1 label").inner_text().strip() == "Value for {{name}}"
    assert not page.locator("#placeholder-2").is_visible()
    set_number(page, "max_steps", "2")
    page.locator("#start").click()
    page.locator("#start-notice").get_by_text("template placeholders {{author}}, {{name}}").wait_for(timeout=30_000)
    assert page.locator("#start-notice").get_by_text("Not started").is_visible()
    page.locator("#queue-add").click()  # the queue refuses it as Start does
    page.locator("#start-notice").get_by_text("Not queued").wait_for(timeout=30_000)
    assert "template placeholders {{author}}, {{name}}" in page.locator("#start-notice").inner_text()
    page.locator("#placeholder-0 input").fill("Orbit Labs")
    page.locator("#placeholder-1 input").fill("Nova")
    page.locator("#fill-placeholders").click()
    page.locator("#preview-summary").get_by_text("Placeholders filled in").wait_for(timeout=60_000)
    summary = page.locator("#preview-summary").inner_text()
    assert "Template placeholders left" not in summary and "Nova" in summary and "identity.json" in summary
    assert not page.locator("#placeholders").is_visible() and page.locator("#train-paths textarea").input_value() == ""
    assert "I am Nova, an AI assistant developed by Orbit Labs" in " ".join(sum(table_rows(page, "preview-table"), []))
    shot(page, tmp_path, "placeholders-filled.png")
    before_job = runner.status().job_id
    page.locator("#start").click()
    wait_for(lambda: runner.status().job_id != before_job, 30, "the run starts")
    assert runner.wait(60)
    assert source.read_bytes() == before
    record = runner.store.get_run(runner.status().job_id)
    (trained,) = record.request["local_datasets"]
    assert Path(trained).parent == settings.uploads_dir.resolve()  # the kept copy, which run.json records
    filled = fill_record(trained)  # (data.fill; run.json's "filled_from": tests/trainer_core/data/test_fill.py)
    assert filled["values"] == {"author": "Orbit Labs", "name": "Nova"} and filled["source"] == "identity.json"


def test_the_monitor_counts_up_and_shows_the_stage_before_the_first_step(page, page_app, datasets_dir):
    """Between Start and the first step the monitor names the stage (of the four), counts
    the seconds in it and since Start every second, and shows the stage's own progress (rows
    tokenized) with a bar."""
    from tests.support.fake_workers import SLOW_START_STEPS

    dataset(page, datasets_dir / "identity.json")
    set_number(page, "max_steps", str(SLOW_START_STEPS))  # the fake worker tokenizes for 6 s
    page.locator("#start").click()
    wait_for(lambda: "stage 2 of 4: reading and tokenizing the data" in status_text(page), timeout_s=30, what="stage 2")
    ticks = page.locator("#status .tick")
    first = ticks.first.inner_text()
    time.sleep(1.6)
    text = status_text(page)
    assert re.search(r"\d+m \d\ds in this stage · \d+m \d\ds since Start", text), text
    assert re.search(r"\d+ of 90 rows tokenized", text) and page.locator("#status progress").count() == 1, text
    assert ticks.first.inner_text() != first  # counted up on the page between two updates
    page.locator("#cancel").click()
    wait_status(page, "cancelled", 30_000)
