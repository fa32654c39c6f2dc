"""``run_preflight``: what a run would train on and what it would cost, from the tokenizer alone
(no model weights), in a few seconds; and ``start_issues``, the part of it Start refuses on.

Measured here (2 CPU cores shared with other work, load average 8): 999 Alpaca rows, default request,
2.3-4.0 s with the tokenizer in memory (estimates included; 2.5 s without), of which tokenizing is
~1.7 s and reading the file (twice: rows, then ``reading_notes``) most of the rest. A fresh process
adds ~11 s of imports and ~4 s to load the tokenizer. Start's share (``start_issues``): 1.9-2.4 s.
The app runs both in its check worker (``admission.check_worker``), which has the imports and the
tokenizers warm; the CLI runs them in its own process.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from trainer_core.data.files import DatasetError
from trainer_core.data.preview_tokenizer import load_preview_tokenizer, local_model_folder
from trainer_core.model_kind import kind_for_folder, kind_for_request
from trainer_core.preflight import rules
from trainer_core.preflight.audio import audio_check
from trainer_core.preflight.data_memory import data_over_memory, tokenized_bytes
from trainer_core.preflight.gather import Gathered, count_media, gather
from trainer_core.preflight.grpo import grpo_summary
from trainer_core.preflight.report import FileCheck, Issue, LengthHistogram, PreflightReport
from trainer_core.preflight.samples import pick_samples, sample_row
from trainer_core.preflight.steps import StepPlan, packed_sequences, plan_steps
from trainer_core.preflight.structure import model_structure
from trainer_core.preflight.token_issues import (
    cached_tokens_pass,
    default_template_note,
    no_tokens,
    template_shaping,
    tools_line,
)
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import TrainingMethod

log = logging.getLogger(__name__)

HISTOGRAM_BINS = 20
NO_TOKENIZER = "the model's tokenizer is not on this machine"
NO_DATA = "the data could not be checked (see the error)"


def run_preflight(
    request: TrainingStartRequest,
    settings: Settings,
    store: Optional[Any] = None,
    estimates: bool = True,
    seen: Optional[Callable[[Gathered], None]] = None,
) -> PreflightReport:
    """The pre-flight report of ``request`` (paths already checked by the caller, e.g.
        ``admission.request_paths.checked_request``). Loads only the tokenizer (``load_preview_tokenizer``) and
        the model's config; reads and tokenizes the data as training does. Data that training could not
        use is an error in the report (code ``data_error``), not an exception. With ``estimates`` the
        memory and time estimates are added (``preflight.estimates``; ``store``'s run history gives
        this machine's measured speed). ``seen`` is called with the rows read and counted (the sampled
    check's estimates: ``preflight.sampled``). Never raises for bad data; raises only for bugs."""
    started = time.perf_counter()
    folder = local_model_folder(request.model_name, settings)
    audio, audio_errors = audio_check(request, settings, folder)  # every clip by file and row
    if audio_errors:
        return refused_report(request, audio_errors, started, folder is not None)
    tokenizer = load_preview_tokenizer(request.model_name, settings, request.default_chat_template)
    kind = kind_for_request(request, folder)
    own = kind.check_report(request, folder, tokenizer, started)
    if own is not None:  # a kind that reads its data its own way (embedding pairs)
        own.precision, own.audio = precision_summary(request), audio
        own.check_seconds = round(time.perf_counter() - started, 3)
        return own
    warnings: list[Issue] = [] if tokenizer is not None else [rules.tokenizer_missing(request.model_name)]
    try:
        found = gather(request, tokenizer)
    except DatasetError as exc:
        return refused_report(request, [rules.data_error(exc)], started, tokenizer is not None, warnings)
    count_media(found, kind, folder)  # e.g. the clips' audio tokens, which the tokenizer alone does not see
    if seen is not None:
        seen(found)
    counts = found.train_counts
    rows = len(found.train)
    kept = counts.kept if counts is not None else np.ones(rows, dtype=bool)
    plan = _plan(request, found, kept)
    errors = [
        issue
        for issue in (
            rules.trackers_missing(request),
            no_tokens(found, request),
            rules.rewards_unusable(request, found.train.column_names),
            rules.embedding_fields_unused(request),
        )
        if issue
    ]
    warnings += [
        issue
        for issue in (
            rules.truncation(counts) if counts is not None else None,
            rules.eval_too_small(_eval_rows(found), request, found.eval is not None),
            rules.evaluations(request, plan.total_steps, found.eval is not None),
            rules.placeholders(found.sources),
            rules.learning_rate(request),
            template_shaping(found, tokenizer, request),
            default_template_note(found, tokenizer, request),
            data_over_memory(settings, tokenized_bytes(found.train_encoded, rows)),
        )
        if issue
    ]
    warnings += budget_advice(request, plan.total_steps, int(kept.sum()))
    report = PreflightReport(
        model_name=request.model_name,
        tokenizer_found=tokenizer is not None,
        max_seq_length=request.max_seq_length,
        files=_files(found, request),
        rows_read=rows + _held_out(found),
        rows_kept=int(kept.sum()),
        rows_dropped=int((~kept).sum()),
        **token_numbers(counts),
        eval_rows=_eval_rows(found),
        histogram=length_histogram(counts),
        samples=_samples(found, tokenizer, request),
        global_batch_size=plan.global_batch_size,
        steps_per_epoch=plan.steps_per_epoch,
        total_steps=plan.total_steps,
        epochs=plan.epochs,
        warnings=warnings,
        errors=errors,
    )
    structure, structure_errors = model_structure(request, settings)
    report.errors += structure_errors
    if structure is not None:
        report.architecture, report.attention = structure.architecture, structure.attention
        report.adapted_modules, report.adapted_count = structure.adapted, structure.adapted_count
    report.vision = kind_for_folder(folder).check_line(request, settings, folder)  # the model kind's line
    if found.media_tokens and report.vision:
        report.vision += f"; the token counts include {found.media_tokens} {'/'.join(kind.media)} tokens"
    report.audio = audio
    report.method = grpo_summary(request, found.train.column_names)
    report.tools = tools_line(found, tokenizer, request)
    report.precision = precision_summary(request)
    if tokenizer is None:
        report.no_estimates = NO_TOKENIZER
    elif not plan.total_steps:
        report.no_estimates = "no training step would run"
    elif estimates:
        _add_estimates(report, request, settings, store, found, plan)
    report.check_seconds = round(time.perf_counter() - started, 3)
    log.info(
        "pre-flight check of %d rows: %.2f s, %d warnings, %d errors",
        rows,
        report.check_seconds,
        len(report.warnings),
        len(report.errors),
    )
    return report


def start_issues(request: TrainingStartRequest, settings: Settings) -> list[Issue]:
    """The errors Start refuses on, with the check's messages: reads and tokenizes the local data
    (no model weights, no estimates), or, when the token cache holds every split with a trained
    token (a Start after its check: ``token_issues.cached_tokens_pass``), reads no row. Hub data is left to the worker; when the tokenizer is not on
    this machine only the data is read (the worker checks tokens). Raises DatasetError for data
    training could not read, as ``data.prepare.check_local_data`` does. A tracker in ``report_to``
    without its package is refused first, before any data is read."""
    began = time.perf_counter()
    missing = rules.trackers_missing(request)
    if missing:
        return [missing]
    folder = local_model_folder(request.model_name, settings)
    audio_errors = audio_check(request, settings, folder)[1]
    if audio_errors:
        return audio_errors
    tokenizer = load_preview_tokenizer(request.model_name, settings, request.default_chat_template)
    kind = kind_for_request(request, folder)
    own = kind.check_report(request, folder, tokenizer, time.perf_counter())
    if own is not None:  # a kind that reads its data its own way (embedding pairs)
        return own.errors
    _, structure_errors = model_structure(request, settings)
    if structure_errors or request.hf_dataset:
        return structure_errors
    if cached_tokens_pass(request, tokenizer, kind):  # a Start after its check: no row read again
        log.info("start check: the data's tokens are cached (%.1f s), rows not read", time.perf_counter() - began)
        return [issue for issue in (rules.embedding_fields_unused(request),) if issue]
    found = gather(request, tokenizer, notes=False)
    count_media(found, kind, folder)  # rows whose clips alone fill max_seq_length are left out, as by the check
    checks = (
        no_tokens(found, request),
        rules.rewards_unusable(request, found.train.column_names),
        rules.embedding_fields_unused(request),
    )
    return [issue for issue in checks if issue]


def precision_summary(request: TrainingStartRequest) -> str:
    """What ``models.precision`` will choose for ``request`` on the training device, in one line
    ("bf16 mixed precision: <reason>" or "fp32: <reason>"); on a GPU, known only in the worker
    (the check does not import torch), the rule."""
    from trainer_core.models.precision import request_precision
    from trainer_core.preflight.costs import training_device

    if training_device() != "cpu":
        if request.mixed_precision == "no":
            return "fp32: mixed_precision is no"
        return "bf16 mixed precision where this GPU supports bf16 (else fp32)"
    chosen = request_precision(request, "cpu")
    return f"{'bf16 mixed precision' if chosen.dtype == 'bf16' else 'fp32'}: {chosen.reason}"


def _eval_rows(found: Gathered) -> int:
    if found.eval is None:
        return 0
    return int(found.eval_counts.kept.sum()) if found.eval_counts is not None else len(found.eval)


def _held_out(found: Gathered) -> int:
    """Training-file rows the val_size split holds out for evaluation."""
    return len(found.eval) if found.eval is not None and found.eval_from_split else 0


def _plan(request: TrainingStartRequest, found: Gathered, kept: np.ndarray) -> StepPlan:
    """Steps for the kept training rows (packed first with ``packing``; GRPO: ``num_generations``
    completions per prompt, as TRL's sampler repeats each prompt; no tokenizer: unknown, 0)."""
    if request.training_method == TrainingMethod.grpo:
        return plan_steps(int(kept.sum()) * request.num_generations, request)
    if not request.packing:
        return plan_steps(int(kept.sum()), request)
    if found.train_encoded is None:
        return plan_steps(0, request)
    packed = packed_sequences(found.train_encoded.select(np.flatnonzero(kept)), request.max_seq_length)
    return plan_steps(packed, request)


def token_numbers(counts: Any) -> dict[str, Any]:
    """The report's token fields (zeros without a tokenizer); sums as ``TokenizationStats``."""
    if counts is None or len(counts.full) == 0:
        return dict(
            rows_truncated=0,
            rows_truncated_share=0.0,
            tokens_total=0,
            tokens_trained=0,
            tokens_cut=0,
            rows_without_trained_tokens=0,
        )
    truncated = int((counts.full > counts.max_seq_length).sum())
    return dict(
        rows_truncated=truncated,
        rows_truncated_share=round(truncated / len(counts.full), 4),
        tokens_total=int(counts.cut[counts.kept].sum()),
        tokens_trained=int(counts.trained[counts.kept].sum()),
        tokens_cut=int(np.maximum(counts.full - counts.max_seq_length, 0).sum()),
        rows_without_trained_tokens=int((~counts.kept).sum()),
    )


def _files(found: Gathered, request: TrainingStartRequest) -> list[FileCheck]:
    """One FileCheck per source: rows read, kept (in the training split with a trained token, or
    evaluation rows kept), dropped with reasons; val_size hold-outs as a note."""
    counts, out = found.train_counts, []
    train_of = found.source_of_train()
    eval_of = found.source_of_eval()
    for index, source in enumerate(found.sources):
        read = len(source.rows)
        split_counts = counts if source.split == "train" else found.eval_counts
        mine = (train_of if source.split == "train" else eval_of) == index
        notes = list(source.notes)
        if source.split == "train" and request.val_size > 0:
            notes.append(
                f"{int((eval_of == index).sum())} rows held out for evaluation (val_size={request.val_size:g})"
            )
        reasons: dict[str, int] = {}
        if split_counts is not None and mine.any():
            lost = mine & ~split_counts.kept
            reasons = {
                "no_trained_tokens": int((lost & (split_counts.trainable == 0)).sum()),
                "answer_after_max_seq_length": int((lost & (split_counts.trainable > 0)).sum()),
            }
            reasons = {reason: rows for reason, rows in reasons.items() if rows}
        dropped = sum(reasons.values())
        out.append(
            FileCheck(
                name=source.name,
                split=source.split,
                format=source.format,
                rows_read=read,
                rows_kept=int(mine.sum()) - dropped,
                rows_dropped=dropped,
                drop_reasons=reasons,
                notes=notes,
            )
        )
    return out


def length_histogram(counts: Any) -> LengthHistogram:
    """HISTOGRAM_BINS equal integer-width bins from 0 over the longest of the rows and max_seq_length."""
    if counts is None or len(counts.full) == 0:
        return LengthHistogram()
    top = max(int(counts.full.max()), counts.max_seq_length)
    width = max(1, math.ceil(top / HISTOGRAM_BINS))
    edges = np.arange(0, width * HISTOGRAM_BINS + 1, width)
    hist, _ = np.histogram(counts.full, bins=edges)
    return LengthHistogram(edges=[int(e) for e in edges], counts=[int(c) for c in hist])


def _samples(found: Gathered, tokenizer: Any, request: TrainingStartRequest) -> list:
    """Three kept training rows rendered as training sees them (see ``samples.pick_samples``)."""
    if tokenizer is None or found.train_counts is None or not found.train_counts.kept.any():
        return []
    kept = np.flatnonzero(found.train_counts.kept)
    sources = found.source_of_train()[kept]
    truncated = found.train_counts.full[kept] > request.max_seq_length
    chosen = [int(kept[i]) for i in pick_samples(list(sources), list(truncated))]
    return [
        sample_row(
            found.train_encoded[i],
            found.sources[int(found.train_encoded[i]["_source"])].name,
            tokenizer,
            request.max_seq_length,
        )
        for i in chosen
    ]


def budget_advice(request: TrainingStartRequest, total_steps: int, rows_kept: int) -> list[Issue]:
    """Helper module ``preflight.advice``'s "run too short / learning rate too low" warnings."""
    try:
        from trainer_core.preflight.advice import training_budget_issues
    except ModuleNotFoundError as exc:
        if exc.name != "trainer_core.preflight.advice":
            raise
        return []
    if request.training_method != TrainingMethod.sft:
        return []  # the budgets were measured on SFT runs; a preference run starts from what the model knows
    return list(training_budget_issues(request, total_steps, rows_kept)) if total_steps else []


def refused_report(
    request: TrainingStartRequest,
    errors: list[Issue],
    started: float,
    tokenizer_found: bool = True,
    warnings: Optional[list[Issue]] = None,
) -> PreflightReport:
    """The report when the data could not be checked (``errors`` say why; ``started``: the
    ``time.perf_counter()`` of the check's start): nothing counted, nothing estimated."""
    plan = plan_steps(0, request)
    return PreflightReport(
        model_name=request.model_name,
        tokenizer_found=tokenizer_found,
        max_seq_length=request.max_seq_length,
        files=[],
        rows_read=0,
        rows_kept=0,
        rows_dropped=0,
        **token_numbers(None),
        eval_rows=0,
        histogram=LengthHistogram(),
        samples=[],
        global_batch_size=plan.global_batch_size,
        steps_per_epoch=0,
        total_steps=0,
        epochs=0.0,
        no_estimates=NO_DATA,
        warnings=list(warnings or []),
        errors=errors,
        check_seconds=round(time.perf_counter() - started, 3),
    )


def _add_estimates(
    report: PreflightReport,
    request: TrainingStartRequest,
    settings: Settings,
    store: Optional[Any],
    found: Gathered,
    plan: StepPlan,
) -> None:
    """Memory and time estimates (``preflight.estimates``) into ``report``, and the memory warning."""
    from trainer_core.preflight.costs import estimate_costs

    costs = estimate_costs(request, settings, store, found, plan)
    if costs is None:
        here = local_model_folder(request.model_name, settings) is not None
        report.no_estimates = (
            "its architecture cannot be counted" if here else "the model's config is not on this machine"
        )
        return
    report.memory, report.time = costs
    report.memory_estimate_gib = round(report.memory.total_gib, 3)
    report.time_estimate_seconds = round(report.time.total_seconds, 1)
    issue = rules.memory_over_free(report.memory.total_gib, report.memory.free_gib, report.memory.device)
    if issue:
        report.warnings.append(issue)


__all__ = ["budget_advice", "length_histogram", "refused_report", "run_preflight", "start_issues", "token_numbers"]
