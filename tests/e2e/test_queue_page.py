"""The job queue on the page, in a real browser (headless Chromium via Playwright; the real app with
``fake_workers.page_worker`` standing in for training): Add to queue while a job trains, the table's
positions and summaries, Move up / Remove, a refusal naming the field, and the queued jobs starting
on their own when the machine is free."""

from __future__ import annotations

import pytest

from tests.support.page_tools import dataset, set_number, shot, start_job, table_rows, wait_status

pytestmark = pytest.mark.slow


def _rows(page, count: int) -> list[list[str]]:
    page.wait_for_function(
        'n => document.querySelectorAll(\'#queue-table [data-testid^="cell-"][data-testid$="-1"]\').length === n',
        arg=count,
        timeout=30_000,
    )
    return table_rows(page, "queue-table")


@pytest.mark.timeout(600)  # the queued job trains for real; slow when CI loads the machine
def test_add_to_queue_reorder_remove_and_run(page, page_app, datasets_dir, tmp_path):
    _, runner, _ = page_app
    # another user's job holds the machine until it is cancelled below (4000 steps, 1000 s: on a loaded CI
    # machine the clicks below took over 100 s once, and a 400-step job ended first: the queued job
    # started early and the cancel below hit it)
    start_job(runner, datasets_dir, max_steps=4000)
    dataset(page, datasets_dir / "identity.json")
    set_number(page, "max_steps", "3")
    for rate in ("0.0002", "0.0003"):
        set_number(page, "learning_rate", rate)
        page.locator("#queue-add").click()
        page.locator("#queue-summary").get_by_text(f"{1 if rate.endswith('2') else 2} job").wait_for(timeout=30_000)
    wait_status(page, "training", 30_000)  # after Add, the tab follows the job that has the machine
    rows = _rows(page, 2)
    assert [r[0] for r in rows] == ["1", "2"] and "lr 0.0002" in rows[0][2] and "identity.json" in rows[0][2]
    assert all(r[1] == "waiting" for r in rows)
    assert page.locator("#queue-waiting").inner_text().startswith("2 jobs waiting in the queue")
    page.locator('#queue-table [data-testid="cell-1-1"]').click()
    page.wait_for_function("() => document.querySelector('#queue-id textarea, #queue-id input').value.startsWith('q_')")
    page.locator("#queue-up").click()
    page.locator("#queue-notice").get_by_text("is now at position 1").wait_for(timeout=30_000)
    assert "lr 0.0003" in _rows(page, 2)[0][2]
    shot(page, tmp_path, "queue.png")

    set_number(page, "batch_size", "0")  # out of bounds: refused, nothing queued
    page.locator("#queue-add").click()
    notice = page.locator("#start-notice .refusal")
    notice.wait_for(timeout=30_000)
    assert "Not queued" in notice.inner_text() and "Batch size" in notice.inner_text()
    assert len(_rows(page, 2)) == 2

    page.locator('#queue-table [data-testid="cell-1-1"]').click()
    page.locator("#queue-remove").click()
    page.locator("#queue-notice").get_by_text("Removed").wait_for(timeout=30_000)
    assert "lr 0.0003" in _rows(page, 1)[0][2]
    runner.stop(save=False)  # the other user's job is cancelled: the queued one starts
    page.locator("#queue-summary").get_by_text("No jobs waiting").wait_for(timeout=60_000)  # it started on its own
    wait_status(page, "completed", 300_000)  # the monitor followed the queued job to its end (slow under CI load)
    assert runner.wait(60)
    runs = runner.store.list_runs()
    assert runs[0].request["learning_rate"] == 3e-4 and runs[0].request["max_steps"] == 3
