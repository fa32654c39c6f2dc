"""Defaults that teach: a run with every setting at its default learns a small
dataset (real model, slow), and the pre-flight's run-too-short / learning-rate-too-low advice
(fast). Figures: docs/BENCHMARKS.md "Defaults that teach"; bench/defaults.py."""

from __future__ import annotations

import pytest

from trainer_core.fieldmeta import default
from trainer_core.preflight.advice import (
    MIN_LR_BUDGET,
    lr_budget,
    schedule_mean,
    training_budget_issues,
)
from trainer_core.preflight.steps import plan_steps
from trainer_core.schemas import TrainingStartRequest

DATA = {"local_datasets": ["data.json"]}
IDENTITY_ROWS = 91


def _issues(rows: int, **fields) -> list:
    request = TrainingStartRequest(**DATA, **fields)
    return training_budget_issues(request, plan_steps(rows, request).total_steps, rows)


def test_defaults_are_the_measured_ones():
    assert (default("num_epochs"), default("max_steps"), default("learning_rate")) == (3.0, 0, 1e-3)
    assert plan_steps(IDENTITY_ROWS, TrainingStartRequest(**DATA)).total_steps == 69


def test_defaults_on_a_small_dataset_get_no_advice():
    assert _issues(IDENTITY_ROWS) == []


def test_old_defaults_are_too_short_and_the_fix_is_named():
    issues = _issues(IDENTITY_ROWS, num_epochs=1.0, learning_rate=2e-4)
    codes = [i.code for i in issues]
    assert codes == ["run_too_short", "learning_rate_too_low"]
    short, low = issues
    assert short.level == "warning" and short.fields == ["num_epochs", "max_steps"]
    assert "23 optimizer steps, 1.0 passes over its 91 rows" in short.message
    assert "raise num_epochs to 3 (or set max_steps to 60)" in short.message
    # the run's own 23 steps first (2e-4 x 23 x 1/2 = 0.0023), then the 69 steps of the fix: 0.0069 < MIN_LR_BUDGET
    assert (
        "over 23 steps (cosine schedule) sums to 0.0023; over the 69 steps the fix above gives, 0.0069" in low.message
    )
    assert "raise learning_rate to" in low.message and "60 steps" not in low.message


def test_max_steps_run_gets_a_max_steps_fix():
    (short,) = _issues(IDENTITY_ROWS, max_steps=10)
    assert short.code == "run_too_short" and "raise max_steps to 60" in short.message
    assert short.fields[0] == "max_steps"


def test_tiny_dataset_needs_steps_for_the_learning_rate_budget():
    # 8 rows at batch 4 = 2 steps per epoch: 3 epochs are 3 passes but only 6 steps, and at the
    # top LoRA rate (1e-3, cosine: mean 1/2) MIN_LR_BUDGET needs 0.01 / (1e-3 x 0.5) = 20 steps.
    (few,) = _issues(8)
    assert few.code == "run_too_short" and "over 6 steps" in few.message and "raise max_steps to 20" in few.message
    (short,) = _issues(8, num_epochs=1.0)  # the fix already covers the budget: no second warning
    assert "raise num_epochs to 10 (or set max_steps to 20)" in short.message
    assert _issues(8, num_epochs=10.0) == []


def test_large_dataset_one_epoch_is_fine_at_the_default_rate():
    assert _issues(50_000, num_epochs=1.0) == []


def test_low_learning_rate_on_a_long_run_is_named_with_a_rate_that_fixes_it():
    (low,) = _issues(IDENTITY_ROWS, learning_rate=1e-5)
    assert low.code == "learning_rate_too_low" and low.fields == ["learning_rate"]
    suggested = float(low.message.rsplit("raise learning_rate to ", 1)[1].split()[0])
    fixed = TrainingStartRequest(**DATA, learning_rate=suggested)
    assert lr_budget(fixed, 69) >= MIN_LR_BUDGET and _issues(IDENTITY_ROWS, learning_rate=suggested) == []


def test_full_fine_tuning_is_not_judged_by_the_lora_budget():
    assert _issues(IDENTITY_ROWS, training_type="full", learning_rate=2e-5) == []


@pytest.mark.parametrize(
    "fields, expected",
    [
        (dict(lr_scheduler_type="constant"), 1.0),
        (dict(lr_scheduler_type="cosine"), 0.5),
        (dict(lr_scheduler_type="linear", warmup_ratio=0.5), 0.5),
        (dict(lr_scheduler_type="constant_with_warmup", warmup_steps=50), 0.75),
    ],
)
def test_schedule_mean(fields, expected):
    assert schedule_mean(TrainingStartRequest(**DATA, **fields), 100) == pytest.approx(expected)


def test_no_steps_or_rows_give_no_advice():
    request = TrainingStartRequest(**DATA)
    assert training_budget_issues(request, 0, 10) == [] and training_budget_issues(request, 10, 0) == []


@pytest.mark.timeout(1500)  # 69 real steps: 250-400 s here, more under load
@pytest.mark.slow
def test_defaults_teach_a_small_dataset(tmp_path, model_dir):  # model_dir: the default model, built
    """The 91-row identity file (name "Nova") trained with every setting at its default: the
    held-out "who are you" answers name Nova and its author and the reference answer's loss falls.
    Measured (bench/defaults.py, docs/bench-results/defaults.json): base model 0 of 4, loss 3.17
    nats/token; defaults (3 epochs, 1e-3) name and author 4 of 4, loss 0.46; 3 epochs at 2e-4 name
    4 of 4 but author 0 of 4, loss 0.90. 69 steps: 412 s on 2 CPU cores shared with other jobs."""
    from bench import defaults as bench

    base_model, tokenizer = bench.load(None)
    base_loss = bench.answer_loss(base_model, tokenizer, [(p, bench.REFERENCE) for p in bench.PROMPTS])
    assert bench.name_count(bench.answers(base_model, tokenizer, bench.PROMPTS)) == 0
    del base_model
    folder, facts = bench.train(bench.filled_identity(tmp_path), tmp_path / "runs")
    assert facts["total_steps"] == 69
    model, tokenizer = bench.load(folder)
    said = bench.answers(model, tokenizer, bench.PROMPTS)
    tuned_loss = bench.answer_loss(model, tokenizer, [(p, bench.REFERENCE) for p in bench.PROMPTS])
    assert bench.name_count(said) >= 3 and bench.name_count(said, bench.AUTHOR) >= 3, said
    assert tuned_loss < base_loss - 1.0, (base_loss, tuned_loss)
