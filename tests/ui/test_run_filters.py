"""The Runs tab's paging: the table shows the newest ``RUNS_PAGE`` runs, *Show more* adds a page,
the line under it says how many of how many, and a count that is no whole number in range (from a
raw queue call) is a ``gr.Error``, as a bad filter is."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest

from trainer_core.runs.store import RunStore
from ui import run_filters
from ui.run_handlers import runs_table


@pytest.fixture
def ctx(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    for i in range(7):
        store.create_run(f"job_{i}", {"hf_dataset": "org/chat"}, f"/runs/{i}", "training", created_at=1000.0 + i)
        store.finish_run(f"job_{i}", "error" if i < 2 else "completed", None, None)
    return SimpleNamespace(runner=SimpleNamespace(store=store), tasks=None, settings=None)


def test_the_table_shows_the_newest_runs_and_the_line_says_of_how_many(ctx, monkeypatch):
    monkeypatch.setattr(run_filters, "RUNS_PAGE", 3)
    assert list(runs_table(ctx, "", "all", "", 3)["job_id"]) == ["job_6", "job_5", "job_4"]
    line, more = run_filters.count_line(ctx, "", "all", "", 3)
    assert line == "The newest 3 of 7 runs." and more["visible"] and more["value"] == "Show 3 more"
    shown = run_filters.show_more(run_filters.show_more(3))
    assert shown == 9 and len(runs_table(ctx, "", "all", "", shown)) == 7
    assert run_filters.count_line(ctx, "", "all", "", shown)[0] == "All 7 runs."
    assert not run_filters.count_line(ctx, "", "all", "", shown)[1]["visible"]
    line, more = run_filters.count_line(ctx, "", "completed", "", 3)
    assert line == "The newest 3 of 5 matching runs." and more["value"] == "Show 2 more"
    assert list(runs_table(ctx, "", "error", "", 3)["job_id"]) == ["job_1", "job_0"]
    assert run_filters.count_line(ctx, "nothing", "all", "", 3)[0] == "No runs match the filters."


@pytest.mark.parametrize("shown", [0, -3, 2.5, True, "50", run_filters.MAX_SHOWN + 1])
def test_a_bad_count_is_refused_naming_it(ctx, shown):
    with pytest.raises(gr.Error, match="number of runs shown must be a whole number from 1 to"):
        runs_table(ctx, "", "all", "", shown)
    with pytest.raises(gr.Error, match="number of runs shown"):
        run_filters.count_line(ctx, "", "all", "", shown)


def test_show_more_stops_at_the_most_shown():
    assert run_filters.show_more(None) == 2 * run_filters.RUNS_PAGE
    assert run_filters.show_more(run_filters.MAX_SHOWN) == run_filters.MAX_SHOWN
    assert run_filters.shown_count(50.0) == 50
