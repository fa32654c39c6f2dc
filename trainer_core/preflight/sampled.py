"""The pre-flight check of large training files answered in seconds from a sample.

Each training file is sampled (``data.row_sample``: its first SAMPLE_FIRST rows and a seeded random
share of ``settings.check_sample_rows``, read without loading the file) and the sample is checked
by ``check.run_preflight`` as any data is. The row and token figures are then the sample's counts
with each row repeated as many times as the file rows it stands for (``sample_math``), so the
histogram, truncation, steps, time and memory come from the same functions as the exact check's;
``report.estimate`` says "estimated from N of M rows" and holds each figure's 95 % error. Memory
comes from the sample's longest rows (the full pass may find longer ones). Evaluation files are
read whole; a ``val_size`` split is estimated with the training rows.

Used when the training files are larger than ``settings.check_sample_mb`` together, all local and
of a sampled kind, and no ``dataset_slice_*`` is set (``wants_sample``); the exact check follows
(``admission.full_pass``).
"""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from trainer_core.data.row_sample import RowSample, can_sample, sample_file
from trainer_core.preflight import rules
from trainer_core.preflight.check import budget_advice, length_histogram, run_preflight, token_numbers
from trainer_core.preflight.data_memory import CODE as DATA_OVER_MEMORY
from trainer_core.preflight.data_memory import data_over_memory, tokenized_bytes
from trainer_core.preflight.gather import Gathered
from trainer_core.preflight.report import PreflightReport, SampleEstimate
from trainer_core.preflight.sample_math import margins, repeats, row_weights
from trainer_core.preflight.steps import StepPlan, packed_sequences, plan_steps
from trainer_core.preflight.tokens import RowCounts
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import TrainingMethod

SAMPLE_FIRST = 100  # the file's first rows, always in the sample (what a reader looks at first)
COUNTED = ("rows_truncated", "eval_too_small", "too_few_evaluations", "run_too_short", "learning_rate_too_low")
COUNTED += (
    "memory_over_free",
    DATA_OVER_MEMORY,
)  # warnings whose figures the sample's counts would get wrong: made again


def wants_sample(request: TrainingStartRequest, settings: Settings) -> bool:
    """True when the check should answer from a sample first (see the module docstring)."""
    paths = request.local_datasets
    if not paths or request.hf_dataset or request.dataset_slice_start or request.dataset_slice_end:
        return False
    if not all(can_sample(path) for path in paths):
        return False
    return sum(Path(path).stat().st_size for path in paths) > settings.check_sample_mb * 2**20


def sampled_preflight(
    request: TrainingStartRequest, settings: Settings, store: Optional[Any] = None
) -> Optional[PreflightReport]:
    """The report of ``request`` estimated from a sample, or None when the sample cannot stand for
    the data (a model kind that reads its data its own way): then only the exact check answers."""
    started = time.perf_counter()
    sizes = [Path(path).stat().st_size for path in request.local_datasets]
    seen: list[Gathered] = []
    with tempfile.TemporaryDirectory(prefix="studio-check-sample-") as folder:
        samples = []
        for index, path in enumerate(request.local_datasets):
            own = Path(folder) / str(index)
            own.mkdir()
            share = max(10, round(settings.check_sample_rows * sizes[index] / sum(sizes)))
            samples.append(sample_file(path, own, SAMPLE_FIRST, share, request.random_seed))
        small = request.model_copy(update={"local_datasets": [str(sample.written) for sample in samples]})
        report = run_preflight(small, settings, store, True, seen.append)
    if not seen:
        if report.errors and report.errors[0].code == "data_error":
            return _with_basis(_file_rows(report, samples), samples, {}, started)
        return None
    scale(report, request, settings, store, seen[0], samples)
    return _with_basis(_file_rows(report, samples), samples, report.estimate.margins, started)  # type: ignore[union-attr]


def _expanded(counts: RowCounts, reps: np.ndarray) -> RowCounts:
    return RowCounts(
        np.repeat(counts.full, reps),
        np.repeat(counts.trained, reps),
        np.repeat(counts.trainable, reps),
        counts.max_seq_length,
    )


def _weights(rows: Any, samples: list[RowSample]) -> np.ndarray:
    """The file rows each of ``rows`` (with ``_source``, ``_row``) stands for, (rows,)."""
    by_source = [row_weights(s.rows, s.first, s.rows_total) for s in samples]
    sources, numbers = np.asarray(rows["_source"], dtype=np.int64), np.asarray(rows["_row"], dtype=np.int64)
    return np.array([by_source[s][n - 1] for s, n in zip(sources, numbers)], dtype=np.float64)


def _per_file(found: Gathered, samples: list[RowSample]) -> dict[str, list[tuple[np.ndarray, int, int]]]:
    """Per training file and sampled row (0 for rows held out for evaluation): kept, trained and
    kept tokens, truncated; the ``margins`` input."""
    counts = found.train_counts
    sources, numbers = found.source_of_train(), np.asarray(found.train["_row"], dtype=np.int64)
    values = {
        "rows_kept": counts.kept,
        "tokens_trained": np.where(counts.kept, counts.trained, 0),
        "tokens_total": np.where(counts.kept, counts.cut, 0),
        "rows_truncated": counts.full > counts.max_seq_length,
    }
    out: dict[str, list[tuple[np.ndarray, int, int]]] = {name: [] for name in values}
    for index, sample in enumerate(samples):
        mine = sources == index
        for name, column in values.items():
            full = np.zeros(sample.rows, dtype=np.float64)
            full[numbers[mine] - 1] = column[mine]
            out[name].append((full, sample.first, sample.rows_total))
    return out


def _files(report: PreflightReport, sources: np.ndarray, counts: RowCounts, samples: list[RowSample]) -> None:
    """The training files' lines (``check._files``) from the repeated rows: rows read, kept and
    dropped with their reasons."""
    for index, (line, sample) in enumerate(zip((f for f in report.files if f.split == "train"), samples)):
        mine = sources == index
        lost = mine & ~counts.kept
        reasons = {
            "no_trained_tokens": int((lost & (counts.trainable == 0)).sum()),
            "answer_after_max_seq_length": int((lost & (counts.trainable > 0)).sum()),
        }
        line.rows_read, line.rows_dropped = sample.rows_total, int(lost.sum())
        line.rows_kept, line.drop_reasons = int((mine & counts.kept).sum()), {k: n for k, n in reasons.items() if n}


def _plan(request: TrainingStartRequest, found: Gathered, kept: int, tokens: int) -> StepPlan:
    """Steps of ``kept`` rows (``tokens`` kept tokens) as ``check._plan`` counts them; with packing,
    the sample's packed sequences scaled by the tokens."""
    if request.training_method == TrainingMethod.grpo:
        return plan_steps(kept * request.num_generations, request)
    if not request.packing:
        return plan_steps(kept, request)
    counts = found.train_counts
    mine = int(counts.cut[counts.kept].sum())
    packed = packed_sequences(found.train_encoded.select(np.flatnonzero(counts.kept)), request.max_seq_length)
    return plan_steps(round(packed * tokens / mine) if mine else 0, request)


def scale(
    report: PreflightReport,
    request: TrainingStartRequest,
    settings: Settings,
    store: Optional[Any],
    found: Gathered,
    samples: list[RowSample],
) -> None:
    """Turn ``report`` (of the sample) into the estimate for the whole files, in place."""
    reps = repeats(_weights(found.train, samples))
    counts = _expanded(found.train_counts, reps)
    eval_counts = found.eval_counts
    if found.eval_from_split and found.eval is not None and eval_counts is not None:
        eval_counts = _expanded(eval_counts, repeats(_weights(found.eval, samples)))
    numbers = token_numbers(counts)
    kept = int(counts.kept.sum())
    plan = _plan(request, found, kept, numbers["tokens_total"])
    eval_rows = int(eval_counts.kept.sum()) if eval_counts is not None else 0
    has_eval = found.eval is not None
    for name, value in numbers.items():
        setattr(report, name, value)
    report.rows_read = sum(sample.rows_total for sample in samples)
    report.rows_kept, report.rows_dropped, report.eval_rows = kept, len(counts.full) - kept, eval_rows
    report.histogram = length_histogram(counts)
    _files(report, np.repeat(found.source_of_train(), reps), counts, samples)
    report.steps_per_epoch, report.total_steps, report.epochs = plan.steps_per_epoch, plan.total_steps, plan.epochs
    report.warnings = [issue for issue in report.warnings if issue.code not in COUNTED]
    again = (
        rules.truncation(counts),
        rules.eval_too_small(eval_rows, request, has_eval),
        rules.evaluations(request, plan.total_steps, has_eval),
        data_over_memory(settings, tokenized_bytes(found.train_encoded, len(counts.full))),
    )
    report.warnings += [issue for issue in again if issue] + budget_advice(request, plan.total_steps, kept)
    found_all = replace(
        found,
        train_counts=counts,
        eval_counts=eval_counts,
        tokenize_seconds=(found.tokenize_seconds or 0.0) * len(counts.full) / max(1, len(found.train_counts.full)),
    )
    if report.memory is not None:
        from trainer_core.preflight.costs import estimate_costs

        costs = estimate_costs(request, settings, store, found_all, plan)
        if costs is not None:
            report.memory, report.time = costs
            report.memory_estimate_gib = round(report.memory.total_gib, 3)
            report.time_estimate_seconds = round(report.time.total_seconds, 1)
            issue = rules.memory_over_free(report.memory.total_gib, report.memory.free_gib, report.memory.device)
            report.warnings += [issue] if issue else []
    found_margins = margins(_per_file(found, samples))
    found_margins.update(_derived(request, found, kept, numbers["tokens_total"], plan, found_margins, report))
    report.estimate = SampleEstimate(rows_sampled=0, rows_total=0, basis="", margins=found_margins)


def _derived(
    request: TrainingStartRequest,
    found: Gathered,
    kept: int,
    tokens: int,
    plan: StepPlan,
    found_margins: dict[str, float],
    report: PreflightReport,
) -> dict[str, float]:
    """Margins of the steps (the plan at the kept rows' or tokens' bounds) and of the time (in
    proportion to the kept tokens' relative margin)."""
    if request.packing:
        low = _plan(request, found, kept, round(tokens - found_margins["tokens_total"]))
        high = _plan(request, found, kept, round(tokens + found_margins["tokens_total"]))
    else:
        spread = round(found_margins["rows_kept"])
        low, high = plan_steps(max(0, kept - spread), request), plan_steps(kept + spread, request)
    out = {
        "steps_per_epoch": float(
            max(high.steps_per_epoch - plan.steps_per_epoch, plan.steps_per_epoch - low.steps_per_epoch)
        ),
        "total_steps": float(max(high.total_steps - plan.total_steps, plan.total_steps - low.total_steps)),
    }
    if report.time_estimate_seconds and tokens:
        out["time_estimate_seconds"] = round(report.time_estimate_seconds * found_margins["tokens_total"] / tokens, 1)
    return out


ROW_NUMBER = re.compile(r"\b(row|line) (\d+)")


def _file_rows(report: PreflightReport, samples: list[RowSample]) -> PreflightReport:
    """The sample's row numbers turned into the files' (shown samples; an error's "row N" and, for
    JSON lines, "line N" when there is one training file, so the row is unambiguous)."""
    by_name = {sample.name: sample for sample in samples}
    for shown in report.samples:
        if shown.file in by_name:
            shown.row = int(by_name[shown.file].picked[shown.row - 1]) + 1
    if len(samples) == 1:
        rows = [int(row) + 1 for row in samples[0].picked]
        numbers = {"row": rows, "line": samples[0].lines or rows}

        def file_row(match: re.Match) -> str:
            word, number = match.group(1), int(match.group(2))
            return f"{word} {numbers[word][number - 1]}" if 0 < number <= len(rows) else match.group(0)

        for issue in report.errors:
            issue.message = ROW_NUMBER.sub(file_row, issue.message)
    return report


def _with_basis(
    report: PreflightReport, samples: list[RowSample], found_margins: dict[str, float], started: float
) -> PreflightReport:
    """``report.estimate`` with its "estimated from N of M rows" line; the check's time."""
    sampled = sum(sample.rows for sample in samples)
    total = sum(sample.rows_total for sample in samples)
    first = sum(sample.first for sample in samples)
    exact = "" if all(sample.exact for sample in samples) else " (row count approximate)"
    basis = (
        f"estimated from {sampled:,} of {total:,} rows{exact}: the first {first:,} and {sampled - first:,} drawn "
        f"at random; ± is a 95 % interval"
    )
    report.estimate = SampleEstimate(rows_sampled=sampled, rows_total=total, basis=basis, margins=found_margins)
    report.check_seconds = round(time.perf_counter() - started, 3)
    return report


__all__ = ["SAMPLE_FIRST", "sampled_preflight", "scale", "wants_sample"]
