"""A newcomer's walk in a real browser at 1280x800: upload identity.json, fill its two
placeholders on the page, Check, Start (max steps reduced), watch it finish, export a GGUF,
evaluate on the default settings, chat with the run beside the base model, train a second run and
compare the two. At every stage: no refusal, no error badge, every table's columns inside its box,
every button on one line.

The page is the point, not what the model says: the walk types the tiny model's folder as the model
(its answers are noise; every stage takes seconds), except with ``STUDIO_UPDATE_SCREENSHOTS=1``,
where it keeps the real default model so that the screenshots in ``docs/`` show real answers. That
a run long enough teaches the filled name is the real-model lane's ``test_defaults_teach`` (same
fill code, ``data.fill``)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.e2e.conftest import screenshot, wait_for
from tests.support.page_tools import ARGS, CHROMIUM, set_number, start_and_finish, table_rows

pytestmark = [pytest.mark.slow, pytest.mark.browser]
WIDTH, HEIGHT = 1280, 800
TABLES = ("preview-table", "runs-table", "export-table", "eval-table", "queue-table", "compare-diff", "share-links")
PROBLEMS = """() => [...document.querySelectorAll(
    '[data-testid="status-tracker"] .error, .toast-body.error, .refusal, .field-invalid')]
    .filter(e => e.offsetParent !== null).map(e => e.className + ': ' + e.innerText.trim().slice(0, 200))"""
CUT_TABLES = """ids => ids.flatMap(id => {
    const table = document.getElementById(id);
    if (!table || table.offsetParent === null) return [];
    const box = table.getBoundingClientRect();
    return [...table.querySelectorAll('th')].filter(h => h.offsetParent !== null)
        .filter(h => { const r = h.getBoundingClientRect(); return r.right > box.right + 1 || r.left < box.left - 1; })
        .map(h => id + ': ' + h.innerText.trim());
})"""
WRAPPED_BUTTONS = """() => [...document.querySelectorAll('#monitor-col button, #runs-actions button')]
    .filter(b => b.offsetParent !== null)
    .filter(b => b.scrollWidth > b.clientWidth + 1 || b.getBoundingClientRect().height > 48)
    .map(b => b.innerText.trim())"""


def _clean(page, stage: str) -> None:
    """No error badge, refusal or marked field is on screen; no table is cut; no button wraps."""
    assert page.evaluate(PROBLEMS) == [], stage
    assert page.evaluate(CUT_TABLES, list(TABLES)) == [], stage
    assert page.evaluate(WRAPPED_BUTTONS) == [], stage


def _pick(page, label: str) -> None:
    box = page.locator("#compare-runs input").first
    box.click()
    box.fill(label)
    page.locator("[role=option]").filter(has_text=label).first.click()


def _press_when_ready(page, selector: str, timeout_ms: int = 120_000) -> None:
    """Click ``selector`` once it is visible and enabled, each wait up to ``timeout_ms`` (a page
    streaming two answers on a busy machine can take longer than Playwright's 30 s default to
    let a click through)."""
    from playwright.sync_api import expect

    button = page.locator(selector)
    expect(button).to_be_visible(timeout=timeout_ms)
    expect(button).to_be_enabled(timeout=timeout_ms)
    button.click(timeout=timeout_ms)


def _train(page, runner, shots, name: str) -> str:
    """Press Start and watch the run complete; returns its job id."""
    job_id = start_and_finish(page, runner, steps=2)
    screenshot(page, shots, name)
    return job_id


@pytest.mark.timeout(600)  # about 160 s with the suite's two processes; more when the machine is busier
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_a_newcomer_goes_from_an_upload_to_an_exported_evaluated_compared_model(
    app_server, datasets_dir, tiny_model_dir, tmp_path
):
    playwright = pytest.importorskip("playwright.sync_api")
    runner, url = app_server
    runner.wait(60)
    shots = tmp_path
    rows = json.loads((datasets_dir / "identity.json").read_text(encoding="utf-8"))
    held_out = tmp_path / "held_out.json"  # the newcomer's own evaluation rows, filled by hand
    fill = {"{{name}}": "Nova", "{{author}}": "Orbit Labs"}
    filled_rows = [{k: _replace(v, fill) for k, v in row.items()} for row in rows[-3:]]
    held_out.write_text(json.dumps(filled_rows), encoding="utf-8")
    identity = tmp_path / "identity.json"
    shutil.copyfile(datasets_dir / "identity.json", identity)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        page.goto(url)
        page.locator("#status").wait_for(timeout=30_000)
        # model and data on the first screen
        upload = page.locator("#train-upload")
        assert upload.bounding_box()["y"] + 60 < HEIGHT, upload.bounding_box()
        screenshot(page, shots, "newcomer-first-screen.png")
        if not os.environ.get("STUDIO_UPDATE_SCREENSHOTS"):
            model = page.locator("#field-model_name input")
            model.fill(str(tiny_model_dir))
            model.press("Enter")
        upload.locator("input[type=file]").set_input_files(str(identity))
        page.locator("#preview-summary").get_by_text("Template placeholders left").wait_for(timeout=60_000)
        page.locator("#placeholder-0 input").fill("Orbit Labs")  # {{author}}
        page.locator("#placeholder-1 input").fill("Nova")  # {{name}}
        page.locator("#fill-placeholders").click()
        page.locator("#preview-summary").get_by_text("Placeholders filled in").wait_for(timeout=60_000)
        assert "I am Nova, an AI assistant developed by Orbit Labs" in " ".join(
            sum(table_rows(page, "preview-table"), [])
        )
        screenshot(page, shots, "newcomer-filled.png")
        _clean(page, "filled")
        set_number(page, "max_steps", "2")
        page.locator("#check").click()
        page.locator("#preflight-report").get_by_text("steps").first.wait_for(timeout=120_000)
        assert page.locator("#preflight-report .pf-error").count() == 0
        screenshot(page, shots, "newcomer-checked.png")
        first = _train(page, runner, shots, "newcomer-trained.png")
        # the check report folded at Start: the status and the loss chart are in view
        assert not page.locator("#preflight-report").is_visible()
        assert page.locator("#loss-plot").bounding_box()["y"] < HEIGHT
        _clean(page, "trained")

        page.get_by_role("tab", name="Runs").click()
        page.locator("#runs-table").get_by_text(first, exact=True).filter(visible=True).first.click()
        page.locator("#run-summary").get_by_text(first).first.wait_for(timeout=30_000)
        page.locator("#export-panel button.label-wrap").first.click()
        assert page.locator("#task-cancel").is_disabled()  # nothing to cancel yet
        page.locator("#export-format").get_by_text("gguf-q4_k_m", exact=True).click()
        page.locator("#export-start").click()
        page.locator("#task-cancel:not([disabled])").wait_for(timeout=30_000)  # a task runs: it can be cancelled
        page.locator("#export-status").get_by_text("completed").wait_for(timeout=300_000)
        zipped = page.locator("#export-links a").filter(has_text="(zip)")
        zipped.wait_for(timeout=30_000)
        download = page.request.get(url.rstrip("/") + zipped.get_attribute("href"))
        assert download.ok and download.body()[:2] == b"PK"
        assert "q4_k_m" in page.locator("#export-table").inner_text()
        screenshot(page, shots, "newcomer-exported.png")
        _clean(page, "exported")

        page.locator("#evaluate-panel button.label-wrap").first.click()
        page.locator("#evaluate-upload input[type=file]").set_input_files(str(held_out))
        page.locator("#eval-start").click()  # every number at its default
        page.locator("#eval-status").get_by_text("completed").wait_for(timeout=480_000)
        scores = page.locator("#eval-scores").inner_text()
        assert "ROUGE-L" in scores and "3 of 3 rows" in scores, scores
        rouge = [cell for row in table_rows(page, "eval-table") for cell in row[-2:]]
        assert rouge and all(len(cell.partition(".")[2]) <= 3 for cell in rouge), rouge
        screenshot(page, shots, "newcomer-evaluated.png")
        _clean(page, "evaluated")

        page.locator("#chat-with-run").click()
        page.locator("#chat-compare input").check()
        page.locator("#chat-message textarea").fill("Who are you?")
        page.locator("#chat-send").click()
        for pane in ("#chat-tuned", "#chat-base"):
            page.wait_for_function(
                f"() => {{ const m = [...document.querySelectorAll('{pane} .message')]; "
                "return m.length >= 2 && m.pop().innerText.trim().length > 8; }",
                timeout=240_000,
            )
        _press_when_ready(page, "#chat-stop")  # read enough: the rest of the answers is not needed
        screenshot(page, shots, "newcomer-chat.png")
        _clean(page, "chat")

        page.get_by_role("tab", name="Train").click()
        second = _train(page, runner, shots, "newcomer-second-run.png")
        page.get_by_role("tab", name="Runs").click()
        page.locator("#runs-refresh").click()
        page.locator("#runs-table").get_by_text(second, exact=True).filter(visible=True).first.wait_for(timeout=30_000)
        page.locator("#compare button.label-wrap").first.click()
        _pick(page, first)
        _pick(page, second)
        wait_for(
            lambda: (
                page.evaluate(
                    "() => { const gd = document.querySelector('#compare-plot .js-plotly-plot');"
                    " return gd && gd.data ? new Set(gd.data.map(t => t.legendgroup)).size : 0; }"
                )
                == 2
            ),
            30,
            "both runs' curves",
        )
        screenshot(page, shots, "newcomer-compare.png")
        _clean(page, "compared")
        browser.close()
    if not os.environ.get("STUDIO_UPDATE_SCREENSHOTS"):
        assert runner.store.get_run(first).request["model_name"] == str(tiny_model_dir)


def _replace(value, fill: dict[str, str]):
    if isinstance(value, str):
        for key, text in fill.items():
            value = value.replace(key, text)
    return value
