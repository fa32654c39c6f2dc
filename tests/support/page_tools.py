"""Browser fixtures and page helpers shared by the page tests (headless Chromium via Playwright,
the real app with ``fake_workers.page_worker`` standing in for training)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import ServerThread, screenshot, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]


@pytest.fixture(scope="module")
def page_app(tmp_path_factory, datasets_dir):
    """(settings, runner, url) of the whole app with the fake page worker."""
    from server import build_app
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path_factory.mktemp("pages"), allowed_paths=str(datasets_dir))
    runner = JobRunner(
        worker_target=fake_workers.page_worker, runs_dir=settings.runs_dir, store=RunStore(settings.db_path)
    )
    with ServerThread(build_app(settings, runner)) as server:
        yield settings, runner, server.url
        runner.stop(save=False)
        runner.wait(10)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's, driven by Playwright); the test is skipped without it."""
    pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, page_app):
    _, runner, url = page_app
    runner.stop(save=False)
    assert runner.wait(20)
    tab = browser.new_page(viewport={"width": 1400, "height": 1000})
    tab.goto(url)
    tab.wait_for_function(
        "() => /^(idle|completed|stopped|cancelled|error)/.test("
        "(document.querySelector('#status') || {innerText: ''}).innerText.trim())",
        timeout=30_000,
    )
    yield tab
    tab.close()


def open_studio(browser, url: str, width: int = 1400, height: int = 1100):
    """A new tab on the app at ``url``, once its status line has loaded (whatever the shared app's
    previous test left: idle, completed, stopped, error)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url)
    page.wait_for_function(
        "() => { const s = document.querySelector('#status'); "
        "return s && s.innerText.trim() && !s.innerText.includes('Loading status'); }",
        timeout=60_000,
    )
    return page


def shot(page, tmp_path: Path, name: str) -> None:
    screenshot(page, tmp_path, name)


def dataset(page, path: Path, as_is: bool = True) -> None:
    """Type ``path`` as the training data and wait for its preview; a file with template
    placeholders (identity.json) is then marked *Train with them as they are* unless ``as_is`` is
    False (the page refuses Start otherwise; test_page_states covers filling them in)."""
    box = page.locator("#train-paths textarea")
    box.fill(str(path))
    box.press("Enter")
    page.locator("#preview-summary").get_by_text(f"({path.name})").wait_for(timeout=60_000)
    if as_is and "Template placeholders" in page.locator("#preview-summary").inner_text():
        page.locator("#placeholders-as-is input").check()


def set_number(page, field: str, value: str) -> None:
    section = {"max_steps": "training", "learning_rate": "training", "batch_size": "training"}.get(field)
    if section and not page.locator(f"#field-{field}").is_visible():
        page.locator(f"#section-{section} button.label-wrap").click()
    page.locator(f"#field-{field} input").fill(value)


def enabled(page) -> dict[str, bool]:
    return {name: page.locator(f"#{name}").is_enabled() for name in ("start", "stop", "cancel")}


def wait_status(page, word: str, timeout: int = 30_000) -> None:
    """Until the status line starts with ``word`` (a phase, or ``cancelled``)."""
    page.wait_for_function(
        "w => (document.querySelector('#status') || {innerText: ''}).innerText.trim().startsWith(w)",
        arg=word,
        timeout=timeout,
    )


def status_text(page) -> str:
    return page.locator("#status").inner_text()


def figure(page, elem_id: str) -> dict:
    """The Plotly figure drawn in ``#elem_id``: computed axis ranges and tick values, annotations."""
    return page.evaluate(
        """id => {
        const gd = document.querySelector('#' + id + ' .js-plotly-plot');
        if (!gd || !gd._fullLayout) return null;
        const L = gd._fullLayout;
        const ticks = ax => (ax._vals || []).map(v => v.x);
        return {x_range: L.xaxis.range, y_range: L.yaxis.range, x_ticks: ticks(L.xaxis), x_visible: L.xaxis.visible,
                annotations: (L.annotations || []).map(a => a.text), traces: gd.data.length,
                title: (L.title && L.title.text) || ''};
    }""",
        elem_id,
    )


def table_rows(page, elem_id: str) -> list[list[str]]:
    """The visible cells of the Gradio Dataframe ``#elem_id``, row by row (``cell-<row>-<col>``)."""
    return page.evaluate(
        """id => {
        const rows = {};
        for (const cell of document.querySelectorAll('#' + id + ' [data-testid^="cell-"]')) {
            const [, r, c] = cell.dataset.testid.split('-').map(Number);
            (rows[r] = rows[r] || [])[c] = cell.innerText.trim();
        }
        return Object.keys(rows).sort((a, b) => a - b).map(k => rows[k]);
    }""",
        elem_id,
    )


def start_job(runner, datasets_dir: Path, **settings) -> str:
    from trainer_core.schemas import TrainingStartRequest

    response = runner.start(TrainingStartRequest(local_datasets=[str(datasets_dir / "identity.json")], **settings))
    assert response.status == "queued", response
    return response.job_id


def start_and_finish(page, runner, steps: int, timeout_s: int = 300) -> str:
    """Press Start on ``page`` and wait until this run (not the shared app's previous one, which
    may also have ended at "step N / N") has ended and the status line reads ``completed · step
    steps / steps``; returns its job id. Raises AssertionError when it does not end in
    ``timeout_s`` seconds."""
    before = runner.status().job_id
    page.locator("#start").click()
    wait_for(lambda: runner.status().job_id not in (None, before), 60, "the run starts")
    assert runner.wait(timeout_s), "the run did not end"
    page.wait_for_function(
        "n => new RegExp(`^completed · step ${n} \\/ ${n}`).test(document.querySelector('#status').innerText.trim())",
        arg=steps,
        timeout=60_000,
    )
    return runner.status().job_id
