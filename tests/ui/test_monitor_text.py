"""The monitor's status line (``ui.monitor_text.status_line``) while the trainer evaluates: the
kind's words instead of the stage before the first step (the base model's evaluation) and instead
of the ETA at the last step."""

from __future__ import annotations

from trainer_core.status import TrainingStatus
from trainer_core.vocabulary import Phase
from ui.monitor_text import status_line


def _status(**details) -> TrainingStatus:
    return TrainingStatus(job_id="j", phase=Phase.training, is_training_running=True, message="m", details=details)


def test_an_evaluation_is_named_instead_of_the_stage_or_the_eta():
    base = status_line(_status(phase_seconds=3.0, evaluating="evaluating held-out retrieval"))
    assert "evaluating held-out retrieval" in base and "stage 4 of 4" not in base
    last = status_line(_status(step=10, total_steps=10, eta_seconds=0.0, evaluating="evaluating held-out retrieval"))
    assert "step 10 / 10" in last and "evaluating held-out retrieval" in last and "ETA" not in last
    training = status_line(_status(step=5, total_steps=10, eta_seconds=30.0, evaluating=None))
    assert "ETA 0m 30s" in training and "evaluating" not in training
    assert "stage 4 of 4: the first step" in status_line(_status(phase_seconds=3.0))
