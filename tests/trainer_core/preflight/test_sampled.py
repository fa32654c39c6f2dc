"""``preflight.sampled``: the check answered from a sample, forced onto the shared datasets with a
zero ``check_sample_mb``: its steps and trained tokens within 5 % of the exact check's, the exact
figures inside its 95 % margins, its "estimated from N of M rows" line, and a bad row of the
sample reported by its row in the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_core.cli.check import render
from trainer_core.data.row_sample import choose
from trainer_core.preflight.check import run_preflight
from trainer_core.preflight.sampled import SAMPLE_FIRST, sampled_preflight, wants_sample
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings

SAMPLE_ROWS = 300


def _settings(tmp_path: Path, datasets_dir: Path, **extra) -> Settings:
    chosen = {"check_sample_mb": 0, "check_sample_rows": SAMPLE_ROWS, **extra}
    return Settings(data_dir=tmp_path / "data", allowed_paths=f"{tmp_path},{datasets_dir}", **chosen)


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("alpaca_en_demo.json", {}),
        ("alpaca_en_demo.json", {"packing": True, "val_size": 0.1}),
        ("glaive_toolcall_en_demo.json", {"max_seq_length": 256}),
    ],
)
def test_estimates_are_within_5_percent_of_the_exact_check(tmp_path, datasets_dir, name, extra) -> None:
    request = TrainingStartRequest(local_datasets=[str(datasets_dir / name)], **extra)
    settings = _settings(tmp_path, datasets_dir, check_sample_rows=150 if "glaive" in name else SAMPLE_ROWS)
    estimate = sampled_preflight(request, settings)
    exact = run_preflight(request, settings)
    assert estimate is not None and estimate.estimate is not None
    assert estimate.estimate.rows_sampled < exact.rows_read == estimate.rows_read
    margins = estimate.estimate.margins
    for field in ("total_steps", "tokens_trained", "tokens_total"):
        guess, truth = getattr(estimate, field), getattr(exact, field)
        assert abs(guess - truth) <= 0.05 * truth, (field, guess, truth)
        assert abs(guess - truth) <= margins[field] + 1, (field, guess, truth, margins[field])
    assert abs(sum(estimate.histogram.counts) - sum(exact.histogram.counts)) <= 0.01 * exact.rows_read
    assert {w.code for w in estimate.warnings} == {w.code for w in exact.warnings}
    assert exact.estimate is None


def test_the_report_says_what_it_was_estimated_from(tmp_path, datasets_dir) -> None:
    request = TrainingStartRequest(local_datasets=[str(datasets_dir / "alpaca_en_demo.json")])
    report = sampled_preflight(request, _settings(tmp_path, datasets_dir))
    basis = report.estimate.basis
    assert basis.startswith(f"estimated from {SAMPLE_FIRST + SAMPLE_ROWS} of 999 rows")
    assert f"the first {SAMPLE_FIRST} and {SAMPLE_ROWS} drawn at random" in basis
    text = render(report, colour=False)
    assert "ESTIMATE: Estimated from 400 of 999 rows" in text and "tokens trained ±" in text
    shown = [sample.row for sample in report.samples]
    assert shown and all(1 <= row <= 999 for row in shown)


def test_small_files_keep_the_exact_check(tmp_path, datasets_dir) -> None:
    request = TrainingStartRequest(local_datasets=[str(datasets_dir / "alpaca_en_demo.json")])
    assert not wants_sample(request, Settings(allowed_paths=str(datasets_dir)))  # 0.9 MB < 8 MB
    assert wants_sample(request, _settings(tmp_path, datasets_dir))
    assert not wants_sample(request.model_copy(update={"dataset_slice_end": 10}), _settings(tmp_path, datasets_dir))


def test_a_bad_row_in_the_sample_is_named_by_its_row_in_the_file(tmp_path, datasets_dir) -> None:
    rows = [{"instruction": f"Question {i}?", "input": "", "output": f"Answer {i}."} for i in range(2000)]
    bad = int(choose(len(rows), SAMPLE_FIRST, SAMPLE_ROWS, seed=42)[SAMPLE_FIRST + 50])  # a randomly drawn row
    lines = [json.dumps(row) for row in rows]
    lines[bad] = '{"instruction": "Q", "output": '
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    request = TrainingStartRequest(local_datasets=[str(path)], random_seed=42)
    report = sampled_preflight(request, _settings(tmp_path, datasets_dir))
    assert [issue.code for issue in report.errors] == ["data_error"]
    assert f"line {bad + 1} (row {bad + 1})" in report.errors[0].message
