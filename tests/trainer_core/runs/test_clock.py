"""Between Start and the first step: the run's clocks (time in the phase, since Start),
the rows tokenized so far as the worker reports them, and the monitor's words for both."""

from __future__ import annotations

import re

import datasets

from trainer_core.data import progress
from trainer_core.data.tokenization import encode_rows
from trainer_core.runs.clock import RunClock
from trainer_core.status import TrainingStatus
from trainer_core.vocabulary import Phase
from ui.monitor_text import status_line


def test_the_clock_counts_this_start_and_the_phase_apart_from_the_runs_creation():
    clock = RunClock(created_at=1000.0, session_started_at=5000.0, phase_started_at=5030.0)
    details = clock.details(None, now=5042.5)
    assert details["wall_seconds"] == 4042.5  # a resumed run's wall time counts from its creation
    assert details["session_seconds"] == 42.5 and details["phase_seconds"] == 12.5


def test_the_monitor_names_the_stage_counts_up_and_shows_the_rows_tokenized():
    status = TrainingStatus(
        job_id="j",
        phase=Phase.loading_dataset,
        is_training_running=True,
        message="Reading and tokenizing the dataset",
        details={
            "phase_seconds": 12.4,
            "session_seconds": 75.0,
            "phase_progress": {"done": 400, "total": 999, "unit": "rows tokenized"},
        },
    )
    line = status_line(status)
    assert line.startswith("**loading_dataset** · stage 2 of 4: reading and tokenizing the data · ")
    assert '<span class="tick" data-seconds="12.4">0m 12s</span> in this stage' in line
    assert '<span class="tick" data-seconds="75.0">1m 15s</span> since Start' in line
    assert "400 of 999 rows tokenized" in line and 'value="0.400"' in line
    training = status.model_copy(update={"phase": Phase.training, "details": {"phase_seconds": 3.0}})
    assert "stage 4 of 4: the first step" in status_line(training)
    stepping = training.model_copy(update={"details": {"step": 1, "total_steps": 10, "phase_seconds": 9.0}})
    assert "tick" not in status_line(stepping) and "step 1 / 10" in status_line(stepping)
    ended = training.model_copy(update={"is_training_running": False, "phase": Phase.error})
    assert "stage" not in status_line(ended)


def test_tokenizing_tells_the_listener_how_many_rows_are_done(tokenizer):
    rows = datasets.Dataset.from_dict({"text": [f"row {i}" for i in range(2500)]})
    heard: list[tuple[int, int, str]] = []
    progress.listen(lambda done, total, what: heard.append((done, total, what)))
    try:
        encode_rows(rows, tokenizer, 32, False)
    finally:
        progress.listen(None)
    assert heard and heard[-1] == (2500, 2500, "tokenized")
    assert all(re.fullmatch(r"tokenized", what) for _, _, what in heard)
    assert [done for done, _, _ in heard] == sorted(done for done, _, _ in heard)
    progress.rows_done(1, 2, "tokenized")  # nobody listening: nothing happens
