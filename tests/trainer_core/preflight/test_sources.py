"""Pre-flight rules that need no data: too few evaluations for the evaluation data or early stopping."""

from __future__ import annotations

from trainer_core.preflight import rules
from trainer_core.schemas import TrainingStartRequest


def _request(**values) -> TrainingStartRequest:
    return TrainingStartRequest(local_datasets=["/x.json"], val_size=0.1, **values)


def test_no_evaluation_in_the_run_is_warned_with_the_eval_steps_that_fit():
    issue = rules.evaluations(_request(eval_steps=50), total_steps=20, has_eval=True)
    assert issue is not None and issue.code == "too_few_evaluations" and "never used" in issue.message
    assert "set eval_steps to 10 or less" in issue.message


def test_early_stopping_needs_patience_plus_one_evaluations():
    issue = rules.evaluations(_request(eval_steps=10, early_stopping_patience=3), total_steps=30, has_eval=True)
    assert issue is not None and "early stopping can never act" in issue.message and "needs 4" in issue.message
    assert rules.evaluations(_request(eval_steps=5, early_stopping_patience=3), total_steps=30, has_eval=True) is None


def test_enough_evaluations_or_no_eval_data_says_nothing():
    assert rules.evaluations(_request(eval_steps=10), total_steps=30, has_eval=True) is None
    assert (
        rules.evaluations(TrainingStartRequest(local_datasets=["/x.json"], eval_steps=500), 30, has_eval=False) is None
    )


def test_placeholders_left_in_the_training_rows_are_warned_per_file():
    import datasets

    from trainer_core.preflight.sources import Source

    rows = datasets.Dataset.from_list(
        [
            {
                "messages": [
                    {"role": "user", "content": "who?"},
                    {"role": "assistant", "content": "I am {{name}} by {{author}}"},
                ]
            }
        ]
        * 3
    )
    clean = datasets.Dataset.from_list([{"text": "plain"}])
    issue = rules.placeholders(
        [
            Source("id.json", "train", "messages", rows),
            Source("c.json", "train", "text", clean),
            Source("e.json", "eval", "messages", rows),
        ]
    )
    assert issue is not None and issue.code == "template_placeholders"
    assert "id.json ({{author}} in 3 rows, {{name}} in 3 rows)" in issue.message and "e.json" not in issue.message
    assert rules.placeholders([Source("c.json", "train", "text", clean)]) is None
