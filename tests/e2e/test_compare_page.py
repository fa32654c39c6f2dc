"""Comparing runs in a real browser (headless Chromium, the real app, ``fake_workers.page_worker``): name a
run in the Runs tab and see the name in the table (as text), pick two runs under "Compare runs" and
see both runs' curves in one figure and the setting that differs (learning_rate) in the diff table,
then filter the list by the name."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import wait_for
from tests.support.page_tools import shot, start_job, table_rows

pytestmark = pytest.mark.slow


def _traces(page) -> list[dict]:
    """The drawn compare figure's traces: name, legend group, opacity."""
    return page.evaluate("""() => {
        const gd = document.querySelector('#compare-plot .js-plotly-plot');
        return gd && gd.data ? gd.data.map(t => ({name: t.name, group: t.legendgroup, opacity: t.opacity})) : [];
    }""")


def _pick(page, label: str) -> None:
    """Choose the run shown as ``label`` (its name, else its job id) in the compare picker."""
    box = page.locator("#compare-runs input").first
    box.click()
    box.fill(label)
    page.locator("[role=option]").filter(has_text=label).first.click()


def test_name_a_run_then_compare_two_runs(page, page_app, datasets_dir, tmp_path):
    _, runner, _ = page_app
    first = start_job(runner, datasets_dir, max_steps=4, learning_rate=1e-4)
    assert runner.wait(120)
    second = start_job(runner, datasets_dir, max_steps=6, learning_rate=5e-4)
    assert runner.wait(120)
    page.get_by_role("tab", name="Runs").click()
    page.locator("#runs-refresh").click()
    table = page.locator("#runs-table")
    table.get_by_text(second, exact=True).filter(visible=True).first.wait_for(timeout=30_000)

    table.get_by_text(first, exact=True).filter(visible=True).first.click()
    page.locator("#run-summary").get_by_text(first).first.wait_for(timeout=30_000)
    page.locator("#run-name textarea, #run-name input").first.fill("<b>baseline</b>")
    page.locator("#run-label-save").click()
    wait_for(
        lambda: any(r[0] == first and "<b>baseline</b>" in r for r in table_rows(page, "runs-table")),
        20,
        "the name in the table",
    )
    assert table.locator("b").count() == 0  # shown as text, not markup

    page.locator("#compare button.label-wrap").first.click()
    _pick(page, "<b>baseline</b>")  # a named run goes by its name
    _pick(page, second)
    wait_for(lambda: {t["group"] for t in _traces(page)} == {first, second}, 30, "two runs' curves")
    traces = _traces(page)
    assert len(traces) == 4  # each run: raw (faint) + smoothed
    assert sorted(t["opacity"] or 1.0 for t in traces) == [0.25, 0.25, 1.0, 1.0]  # raw faint, smoothed solid
    assert {t["name"] for t in traces} >= {"&lt;b&gt;baseline&lt;/b&gt;", second}
    assert (
        page.locator("#compare-plot .legendtext").filter(has_text="<b>baseline</b>").count() == 1
    )  # text in the legend
    wait_for(lambda: any(r and r[0] == "learning_rate" for r in table_rows(page, "compare-diff")), 20, "the diff")
    rows = {r[0]: r[1:] for r in table_rows(page, "compare-diff") if r}
    assert rows["learning_rate"] == ["0.0001", "0.0005"] and rows["max_steps"] == ["4", "6"]
    assert "lora_r" not in rows and "final loss" in rows  # equal settings left out; outcomes in
    shot(page, tmp_path, "runs-compare.png")

    box = page.locator("#filter-name textarea, #filter-name input").first  # the list filters by name
    box.fill("BASELINE")
    box.press("Enter")
    wait_for(lambda: [r[0] for r in table_rows(page, "runs-table")] == [first], 20, "the table filtered by name")
