"""Watching tabs share one rendered update per history version."""

import json
import threading

from trainer_core.runs.job import JobRunner
from trainer_core.schemas import TrainingProgress
from ui import handlers


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
