"""Opening a resumed run: steps the worker logged to metrics.jsonl before a crash, but whose events
never reached the run history, are taken back up to the resumed checkpoint's step."""

from __future__ import annotations

from trainer_core.runs.opening import logged_but_not_kept
from trainer_core.status import TrainingProgress


def _train(step: int) -> TrainingProgress:
    return TrainingProgress(job_id="job_x", step=step, total_steps=9, loss=1.0 / step, learning_rate=1e-4)


def _eval(step: int) -> TrainingProgress:
    return TrainingProgress(job_id="job_x", step=step, total_steps=9, eval_loss=2.0 / step)


def test_steps_lost_in_flight_come_back_from_metrics_jsonl_up_to_the_checkpoint(tmp_path):
    logged = [_train(1), _train(2), _eval(2), _train(3), _train(4), _eval(4), _train(5)]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(e.model_dump_json() + "\n" for e in logged) + "{not json\n")
    kept = [_train(1), _train(2), _train(3)]  # the app died with step 2's eval and step 4 in flight
    lost = logged_but_not_kept(path, kept, up_to_step=4)
    assert [(e.step, e.loss is not None) for e in lost] == [(2, False), (4, True), (4, False)]
    assert lost[1] == _train(4)  # as logged
    assert logged_but_not_kept(path, logged, up_to_step=5) == []
    assert logged_but_not_kept(tmp_path / "missing.jsonl", kept, up_to_step=4) == []
