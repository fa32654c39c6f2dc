"""Watching tabs share one rendered update per history version."""

import json
import threading

from trainer_core.runs.job import JobRunner
from trainer_core.status import TrainingProgress
from ui import train_handlers as handlers


def test_one_build_per_version_shared_by_every_tab(monkeypatch):
    runner = JobRunner()
    builds = []
    real_render = handlers.render
    monkeypatch.setattr(handlers, "render", lambda *args: builds.append(1) or real_render(*args))
    shared = handlers.shared_render(runner)
    assert handlers.shared_render(runner) is shared

    results = []
    threads = [threading.Thread(target=lambda: results.append(shared.get(runner))) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len({id(update) for _, update, _ in results}) == 1

    runner.history.append(TrainingProgress(job_id="j", step=1, total_steps=10, loss=2.5, learning_rate=1e-4))
    version, update, running = shared.get(runner)
    assert len(builds) == 2 and version == runner.history.version and not running
    loss_plot = json.loads(update[2].plot)
    assert update[2].type == "plotly" and loss_plot["data"][0]["y"] == [2.5]


def test_watch_ends_at_once_when_idle():
    updates = list(handlers.watch(JobRunner()))
    assert len(updates) == 1 and "idle" in updates[0][0]


def test_a_tabs_newer_stream_ends_its_older_one():
    """A tab that pressed Add twice (or loaded, then pressed Start) keeps one monitor stream: the
    older one ends at its next wake-up, the newer one and other tabs' streams go on."""
    from ui.follow import FOLLOWERS

    before = len(FOLLOWERS)  # other tests' tabs may still be streaming
    runner = JobRunner()
    runner.more_queued = lambda: True  # as if jobs were queued: watchers keep following
    old, other = handlers.watch(runner, "test-tab-a"), handlers.watch(runner, "test-tab-b")
    next(old), next(other)
    new = handlers.watch(runner, "test-tab-a")
    next(new)
    runner.history.append(TrainingProgress(job_id="j", step=1, total_steps=10, loss=2.5, learning_rate=1e-4))
    assert list(old) == []  # woke, saw a newer stream of its tab, ended without drawing again
    assert next(new)[0] == next(other)[0]
    assert len(FOLLOWERS) == before + 2
    new.close(), other.close()
    assert len(FOLLOWERS) == before  # an ended stream forgets its tab


def test_each_tab_gets_its_own_copy_of_the_shared_updates():
    """Gradio pops the ``value`` of a ``gr.update`` dict it sends (``postprocess_update_dict``), so
    the update one tab sent must not be the one the next tab sends: each gets its own dicts."""
    import gradio as gr
    from gradio.blocks import postprocess_update_dict

    runner = JobRunner()
    [first], [second] = list(handlers.watch(runner)), list(handlers.watch(runner))  # idle: one update each
    buttons = slice(handlers.MONITOR_VIEWS, None)
    assert first[buttons] == second[buttons] and first[buttons][0]["value"] == "Start"
    postprocess_update_dict(gr.Button(render=False), first[handlers.MONITOR_VIEWS])  # the first tab's Start sent
    assert "value" not in first[handlers.MONITOR_VIEWS] and second[handlers.MONITOR_VIEWS]["value"] == "Start"
