"""The Runs tab's paging: the table shows the newest ``RUNS_PAGE`` runs, *Show more* adds a page to
the rows the table has, the line under it says how many of how many, and a count or a table that
cannot be read (from a raw queue call) is a ``gr.Error``, as a bad filter is."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from trainer_core.runs.store import RunStore
from ui import run_filters
from ui.run_handlers import more_runs, runs_table


@pytest.fixture
def ctx(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    for i in range(7):
        store.create_run(f"job_{i}", {"hf_dataset": "org/chat"}, f"/runs/{i}", "training", created_at=1000.0 + i)
        store.finish_run(f"job_{i}", "error" if i < 2 else "completed", None, None)
    return SimpleNamespace(runner=SimpleNamespace(store=store), tasks=None, settings=None)


def test_the_table_shows_the_newest_page_and_show_more_adds_one(ctx, monkeypatch):
    monkeypatch.setattr(run_filters, "RUNS_PAGE", 3)
    first = runs_table(ctx, "", "all", "", 3)
    assert list(first["job_id"]) == ["job_6", "job_5", "job_4"]
    line, more = run_filters.count_line(ctx, "", "all", "", first)
    assert line == "The newest 3 of 7 runs." and more["visible"] and more["value"] == "Show 3 more"
    second = more_runs(ctx, "", "all", "", first)
    assert list(second["job_id"]) == ["job_6", "job_5", "job_4", "job_3", "job_2", "job_1"]
    third = more_runs(ctx, "", "all", "", {"headers": [], "data": second.values.tolist()})  # as a raw call sends it
    assert len(third) == 7 and run_filters.count_line(ctx, "", "all", "", third)[0] == "All 7 runs."
    assert not run_filters.count_line(ctx, "", "all", "", third)[1]["visible"]
    line, more = run_filters.count_line(ctx, "", "completed", "", first)
    assert line == "The newest 3 of 5 matching runs." and more["value"] == "Show 2 more"
    assert list(more_runs(ctx, "", "error", "", None)["job_id"]) == ["job_1", "job_0"]
    assert run_filters.count_line(ctx, "nothing", "all", "", None)[0] == "No runs match the filters."


@pytest.mark.parametrize("shown", [0, -3, 2.5, True, "50", run_filters.MAX_SHOWN + 1])
def test_a_bad_count_is_refused_naming_it(ctx, shown):
    with pytest.raises(gr.Error, match="number of runs shown must be a whole number from 1 to"):
        runs_table(ctx, "", "all", "", shown)


@pytest.mark.parametrize("table", ["rows", 7, {"data": "x"}])
def test_a_table_that_cannot_be_read_is_refused(ctx, table):
    with pytest.raises(gr.Error, match="runs table could not be read"):
        run_filters.count_line(ctx, "", "all", "", table)
    with pytest.raises(gr.Error, match="runs table could not be read"):
        more_runs(ctx, "", "all", "", table)
