"""The training worker's progress callback (``training.worker.make_progress_callback``): while the
trainer evaluates (its first prediction step until ``on_evaluate``) the job's details say so in the
model kind's words, once per evaluation, and clear it after."""

from __future__ import annotations

import queue
import threading
from types import SimpleNamespace

from trainer_core.kinds.embedding.kind import EMBEDDING
from trainer_core.model_kind import ModelKind
from trainer_core.training.worker import EventKind, make_progress_callback


def test_an_evaluation_is_announced_once_in_the_kinds_words_and_cleared_after(tmp_path):
    events: queue.Queue = queue.Queue()
    callback = make_progress_callback("j", events, threading.Event(), tmp_path / "m.jsonl", EMBEDDING.evaluating)
    state = SimpleNamespace(global_step=0)
    for _ in range(3):  # one event for the whole evaluation, not one a batch
        callback.on_prediction_step(None, state, None)
    callback.on_evaluate(None, state, None)
    state.global_step = 10
    callback.on_prediction_step(None, state, None)
    got = [events.get_nowait() for _ in range(events.qsize())]
    assert [(kind, p["details"]["evaluating"], p["message"]) for kind, p in got] == [
        (EventKind.INFO, "evaluating held-out retrieval", "Evaluating held-out retrieval at step 0"),
        (EventKind.INFO, None, "Evaluated at step 0"),
        (EventKind.INFO, "evaluating held-out retrieval", "Evaluating held-out retrieval at step 10"),
    ]
    assert ModelKind.evaluating == "evaluating on the held-out rows"
