"""Time left: a smoothed step time with its spread for training, the average
pace for tasks, and how the page says them."""

from __future__ import annotations

import pytest

from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from trainer_core.training.eta import StepTimes
from ui.monitor_text import eta_text, progress_bar
from ui.task_progress import status_line, time_left


def test_the_first_step_is_left_out_and_three_are_needed():
    steps = StepTimes()
    for now in (
        30.0,
        40.0,
        50.0,
        60.0,
    ):  # step 1 ends after a 30 s warm-up (its length is not counted), then 10 s steps
        steps.step_ended(now)
    assert steps.estimate(100) == (1000.0, 1000.0, 1000.0)
    early = StepTimes()
    for now in (30.0, 40.0, 50.0):
        early.step_ended(now)
    assert early.estimate(100) is None


def test_the_estimate_is_the_median_of_recent_steps_with_their_spread():
    steps = StepTimes()
    clock = 0.0
    steps.step_ended(clock)
    for seconds in [10.0] * 30 + [20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0] + [10.0] * 12:
        clock += seconds
        steps.step_ended(clock)
    eta, low, high = steps.estimate(60)  # window: the last 20 steps, 8 of them slow
    assert eta == 600.0 and low == 600.0 and high == 1200.0
    assert eta_text({"eta_seconds": eta, "eta_low_seconds": low, "eta_high_seconds": high}) == (
        "ETA 10m 00s (10m 00s – 20m 00s)"
    )
    assert eta_text({"eta_seconds": None}) == "ETA after 3 steps"
    assert eta_text({"eta_seconds": 65.0, "eta_low_seconds": 65.0, "eta_high_seconds": 65.0}) == "ETA 1m 05s"


def test_a_task_shows_a_bar_and_its_time_left_once_under_way():
    record = TaskRecord(task_id="t1", kind=TaskKind.evaluate, model="base", progress=0.1, created_at=1000.0)
    assert time_left(record, now=1020.0) is None  # one report: the loading is in it
    at_quarter = record.model_copy(update={"progress": 0.25})
    left, low, high = time_left(at_quarter, now=1035.0)
    assert left == 75.0 and low == high == 75.0  # 15 s for 0.15 (the loading left out): 75 s for the rest
    assert time_left(at_quarter.model_copy(update={"phase": TaskPhase.completed}), now=1040.0) is None
    line = status_line(record.model_copy(update={"task_id": "t2", "created_at": 0.0}))
    assert "10%" in line and '<progress class="run-progress" value="0.100"' in line
    assert progress_bar(1.7).startswith('<progress class="run-progress" value="1.000"')


def test_a_stalled_task_has_its_time_left_grow():
    """An evaluation that said "about 40 s left" and then slowed down: the time left follows the
    wait instead of sitting still until the next report."""
    record = TaskRecord(task_id="t3", kind=TaskKind.evaluate, model="base", progress=0.0, created_at=0.0)
    for second, done in ((10, 0.2), (20, 0.4), (30, 0.6)):
        shown = time_left(record.model_copy(update={"progress": done}), now=float(second))
    assert shown == pytest.approx((20.0, 20.0, 20.0))
    stalled = [time_left(record.model_copy(update={"progress": 0.6}), now=float(t))[0] for t in (35, 60, 120)]
    assert stalled[0] == pytest.approx(20.0) and stalled[0] < stalled[1] < stalled[2]  # overdue: the wait counts
    assert stalled[2] == pytest.approx(0.4 * 90 / 0.2)  # 90 s for what took 10


def _synthetic_coverage(
    factor: float, seed: int, total: int = 60, change_at: int = 40, noise: float = 0.1, creep: float = 0.0
) -> list[bool]:
    """For a run of ``total`` steps of about 1 s (± ``noise``) whose step time changes by
    ``factor`` at step ``change_at`` (and then grows by ``creep`` of it each step): whether the ETA range held the actual time left, at each
    step once the change has lasted 5 steps."""
    import random

    rng = random.Random(seed)
    pace = [1.0 if step < change_at else factor * (1 + creep * (step - change_at)) for step in range(total)]
    times = [p * rng.uniform(1 - noise, 1 + noise) for p in pace]
    steps, clock, held = StepTimes(), 0.0, []
    steps.step_ended(clock)
    for step, seconds in enumerate(times):
        clock += seconds
        steps.step_ended(clock)
        done = step + 1
        if done >= change_at + 5 and done < total:
            _, low, high = steps.estimate(total - done)
            held.append(low <= sum(times[done:]) <= high)
    return held


def test_the_eta_range_follows_a_2x_change_of_step_time_within_5_steps():
    """(The median of the latest 20 steps with their 20th-80th percentiles held 62-69 % here.)"""
    for factor in (2.0, 0.5):  # the machine twice as busy from step 40 on, or twice as free
        held = [h for seed in range(10) for h in _synthetic_coverage(factor, seed)]
        assert sum(held) / len(held) >= 0.8, (factor, sum(held) / len(held))


def test_the_range_holds_a_pace_that_keeps_creeping_after_the_change():
    """As CI's run of test_eta_under_load showed: after the 2x change the steps varied ±25 % and kept
    slowing (1 % a step here). The slowest recent step in the high bound holds 84 % of the samples
    (the 80th percentile and median plus deviation alone: 68 %)."""
    held = [h for seed in range(40) for h in _synthetic_coverage(2.0, seed, 40, 20, noise=0.25, creep=0.01)]
    assert sum(held) / len(held) >= 0.8, sum(held) / len(held)


def test_the_point_follows_a_change_within_three_steps():
    steps, clock = StepTimes(), 0.0
    steps.step_ended(clock)
    for seconds in [1.0] * 30 + [2.0] * 3:
        clock += seconds
        steps.step_ended(clock)
    assert steps.estimate(10)[0] == 20.0  # the recent median: the new pace


def test_before_three_steps_the_check_estimate_from_earlier_runs_is_shown():
    from types import SimpleNamespace

    from trainer_core.preflight.timing import early_eta
    from trainer_core.schemas import TrainingStartRequest

    request = TrainingStartRequest(local_datasets=["data.json"], max_steps=0, num_epochs=3.0)
    earlier = SimpleNamespace(
        request=request.model_dump(mode="json"),
        tokens_per_second=500.0,
        training_seconds=600.0,
        wall_seconds=640.0,
        created_at=1.0,
    )
    details = {"total_tokens": 20_000, "rows": 91, "global_batch_size": 4}
    assert early_eta(request, details, [earlier]) == 120.0  # 3 passes x 20,000 tokens at 500 tokens/s
    assert early_eta(request.model_copy(update={"max_steps": 10}), details, [earlier]) == 20_000 * 40 / 91 / 500
    assert early_eta(request, details, []) is None
    assert eta_text({"eta_check_seconds": 120.0, "elapsed_seconds": 15.0}) == "ETA ~1m 45s (earlier runs' speed)"
