"""``python -m trainer_core check --dataset FILE [same flags as train] [--json]``: the pre-flight
check in a terminal. Prints per-file lines, three sample rows with the trained tokens in green and
the masked ones dim (no colour when stdout is not a terminal or NO_COLOR is set: trained text is
then wrapped in « »), a text histogram of token lengths, the steps, the estimates with their parts,
warnings and errors. ``--json`` prints ``PreflightReport.model_dump_json()`` and nothing else.
Training files over ``check_sample_mb`` (``STUDIO_CHECK_SAMPLE_MB``) are answered first from a sample
(``preflight.sampled``: the report says "estimated from N of M rows", each figure with its ±), then
a line when the exact check of every row begins and its report when it ends; with ``--json`` that is
two lines, the estimate's document and the exact one's. The exit code is the exact check's.
Exit codes: 0 no errors, 1 errors, 2 bad input (as ``train``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Optional, TextIO

from trainer_core.preflight.report import PreflightReport

GREEN, DIM, RESET = "\033[32m", "\033[2m", "\033[0m"
PLAIN_MARKS = ("«", "»")  # around trained text when there is no colour
BAR_CHARS = 40


def add_parser(sub: Any, train: argparse.ArgumentParser) -> None:
    """Register ``check`` on ``sub`` with every flag of the ``train`` sub-parser (argparse
    ``parents``), plus ``--json``. Call it after ``train``'s flags are added."""
    check = sub.add_parser(
        "check",
        parents=[train],
        add_help=False,
        help="Pre-flight check: rows, tokens, steps, estimates, warnings; trains nothing.",
        description="Check a training request without training (tokenizer only, no weights).",
    )
    check.add_argument("--json", action="store_true", help="Print the report as one JSON document.")


def use_colour(stream: TextIO) -> bool:
    """ANSI colours only on a terminal and without NO_COLOR (https://no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def run(args: argparse.Namespace) -> int:
    """Build the request as ``train`` does, check it, print; the exit code (0, 1 errors, 2 bad input)."""
    from trainer_core.cli.train import checked_args, operator_settings

    request = checked_args(args, preflight=True)
    if isinstance(request, int):
        return request
    from trainer_core.data import import_data_stack
    from trainer_core.preflight.check import run_preflight

    import_data_stack()
    settings = operator_settings()
    store = _store(settings)
    try:
        _estimate_first(request, settings, store, args.json)
        report = run_preflight(request, settings, store)
    finally:
        if store is not None:
            store.close()
    print(report.model_dump_json() if args.json else render(report, use_colour(sys.stdout)))
    return 1 if report.errors else 0


def _estimate_first(request: Any, settings: Any, store: Any, as_json: bool) -> None:
    """The sampled report and the line that says the exact check follows, when the data is large."""
    from trainer_core.preflight.sampled import sampled_preflight, wants_sample

    if not wants_sample(request, settings):
        return
    estimate = sampled_preflight(request, settings, store)
    if estimate is None or estimate.estimate is None:
        return
    if as_json:
        print(estimate.model_dump_json(), flush=True)
        return
    print(render(estimate, use_colour(sys.stdout)))
    print(f"\nExact check of all {estimate.estimate.rows_total:,} rows under way...\n", flush=True)


def _store(settings: Any) -> Optional[Any]:
    """The run history (for this machine's measured speed) when the data dir has one."""
    if not Path(settings.db_path).is_file():
        return None
    from trainer_core.runs.integrity import HistoryUnreadable
    from trainer_core.runs.store import RunStore

    try:
        return RunStore(settings.db_path)
    except HistoryUnreadable as exc:  # the check works without it: estimates from the hardware alone
        print(f"warning: {exc}", file=sys.stderr)
        return None


def render(report: PreflightReport, colour: bool) -> str:
    """The report as terminal text (see the module docstring)."""
    lines = [
        f"Model {report.model_name} (tokenizer {'found' if report.tokenizer_found else 'NOT on this machine'}), "
        f"max_seq_length {report.max_seq_length}",
        *_basis(report),
        "",
        "Files:",
    ]
    for f in report.files:
        reasons = ", ".join(f"{n} {reason}" for reason, n in f.drop_reasons.items())
        lines.append(
            f"  {f.name} [{f.split}, {f.format}]: {f.rows_read} rows read, {f.rows_kept} kept, "
            f"{f.rows_dropped} dropped" + (f" ({reasons})" if reasons else "")
        )
        lines += [f"    note: {note}" for note in f.notes]
    lines += [
        "",
        f"Training rows: {report.rows_read} read, {report.rows_kept} kept, {report.rows_dropped} dropped; "
        f"{report.rows_without_trained_tokens} without trained tokens; evaluation rows: {report.eval_rows}",
        f"Tokens: {report.tokens_total} kept, {report.trained_words()}; {report.rows_truncated} rows truncated "
        f"({report.rows_truncated_share:.1%}), {report.tokens_cut} tokens cut",
        *_histogram(report),
        f"Steps: {report.steps_per_epoch} per epoch, {report.total_steps} in total ({report.epochs_words()} epochs; "
        f"{report.global_batch_size} rows per optimizer step)",
        *_structure(report),
        *_estimates(report),
        *_samples(report, colour),
        *_issues(report),
        f"Checked in {report.check_seconds:.1f} s.",
    ]
    return "\n".join(lines)


def _basis(report: PreflightReport) -> list[str]:
    """The "estimated from N of M rows" line and each estimated figure's ± (none when exact)."""
    if report.estimate is None:
        return []
    margins = ", ".join(f"{name.replace('_', ' ')} ±{value:,.0f}" for name, value in report.estimate.margins.items())
    basis = report.estimate.basis
    return [f"ESTIMATE: {basis[0].upper()}{basis[1:]}" + (f"; {margins}" if margins else "")]


def _histogram(report: PreflightReport) -> list[str]:
    """One bar per bin; the bin holding max_seq_length is marked."""
    hist = report.histogram
    if not hist.counts:
        return []
    top = max(hist.counts) or 1
    out = ["Token lengths before truncation (rows per bin):"]
    for lo, hi, count in zip(hist.edges, hist.edges[1:], hist.counts):
        inside = lo <= report.max_seq_length < hi or report.max_seq_length == hi == hist.edges[-1]  # last bin: closed
        mark = "  <- max_seq_length" if inside else ""
        out.append(f"  {lo:>6}-{hi:<6} {'#' * round(BAR_CHARS * count / top):<{BAR_CHARS}} {count}{mark}")
    return out


def _parts(parts: dict[str, float], unit: str) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {value:.2f}{unit}" for name, value in parts.items())


def _structure(report: PreflightReport) -> list[str]:
    """The model's class, its attention and what LoRA adapts (when the model is on this machine)."""
    if report.architecture is None:
        audio = [report.audio[0].upper() + report.audio[1:]] if report.audio else []
        lines = [f"Model: {report.vision}"] if report.vision else []
        return lines + audio + [line for line in (report.method, report.tools) if line]
    lines = [f"Model: {report.architecture}; attention {report.attention}"]
    if report.vision:
        lines.append(report.vision[0].upper() + report.vision[1:])
    if report.audio:
        lines.append(report.audio[0].upper() + report.audio[1:])
    if report.adapted_modules:
        lines.append(f"LoRA adapts {report.adapted_count} modules: {report.adapted_modules}")
    if report.precision:
        lines.append(f"Precision: {report.precision}")
    return lines + [line for line in (report.method, report.tools) if line]


def _estimates(report: PreflightReport) -> list[str]:
    out = []
    memory, time_ = report.memory, report.time
    if memory is not None:
        free = f", {memory.free_gib:.1f} GiB free" if memory.free_gib is not None else ""
        out.append(
            f"Memory: about {memory.total_gib:.2f} GiB on {memory.device}{free}: {_parts(memory.parts_gib, ' GiB')}"
        )
        out.append(f"  ({memory.basis})")
    if time_ is not None:
        spread = f" (range {time_.low_seconds:.0f}-{time_.high_seconds:.0f} s)" if time_.low_seconds is not None else ""
        out.append(f"Time: about {time_.total_seconds:.0f} s{spread}: {_parts(time_.parts_seconds, ' s')}")
        if time_.load:
            out.append(f"  ({time_.load}: the range's slow end if it stays so)")
        out.append(f"  ({time_.tokens_per_second:.0f} tokens/s, {time_.speed_source})")
    if not out and report.no_estimates:
        out.append(f"Estimates: not available ({report.no_estimates})")
    return out


def _samples(report: PreflightReport, colour: bool) -> list[str]:
    out = []
    for sample in report.samples:
        legend = "green: trained, dim: masked" if colour else "« »: trained"
        out.append(
            f"--- {sample.file} row {sample.row}: {sample.tokens} tokens, {sample.trained_tokens} trained"
            f"{', truncated' if sample.truncated else ''} ({legend}) ---"
        )
        if colour:
            out.append("".join(f"{GREEN if s.trained else DIM}{s.text}{RESET}" for s in sample.segments))
        else:
            out.append(
                "".join(f"{PLAIN_MARKS[0]}{s.text}{PLAIN_MARKS[1]}" if s.trained else s.text for s in sample.segments)
            )
    return ["", "Samples as training sees them:", *out] if out else []


def _issues(report: PreflightReport) -> list[str]:
    out = []
    for title, issues in (("Errors", report.errors), ("Warnings", report.warnings)):
        if issues:
            out += ["", f"{title}:", *(f"  - [{issue.code}] {issue.message}" for issue in issues)]
    return out or ["", "No warnings or errors."]


__all__ = ["add_parser", "render", "run", "use_colour"]
