"""The pre-flight report as the page shows it: an HTML summary (files, rows, truncation, steps,
estimates with their parts, warnings and errors in the form's labels, three sample rows with the
trained tokens highlighted) and a Plotly histogram of the token lengths with the Max seq length
line. Pure functions of ``trainer_core.preflight.report.PreflightReport``."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from ui.monitor_text import clock
from ui.refusals import describe

ISSUE_CLASS = {"error": "pf-error", "warning": "pf-warning"}


def _e(value: Any) -> str:
    return html.escape(str(value))


def _issues(report: Any) -> tuple[str, tuple[str, ...]]:
    """(HTML list of errors then warnings, widget ids to mark): each message in the form's labels."""
    items, ids = [], []
    for issue in [*report.errors, *report.warnings]:
        said = describe(issue.message, issue.fields)
        ids += said.element_ids
        label = "Error" if issue.level == "error" else "Warning"
        items.append(
            f'<li class="{ISSUE_CLASS[issue.level]}" data-code="{_e(issue.code)}"><strong>{label}:</strong> '
            f"{_e(said.text)}</li>"
        )
    if not items:
        return '<p class="pf-ok">No problems found.</p>', ()
    return f'<ul class="pf-issues">{"".join(items)}</ul>', tuple(dict.fromkeys(ids))


def _files(report: Any) -> str:
    rows = []
    for f in report.files:
        reasons = ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in f.drop_reasons.items() if n) or "-"
        notes = "; ".join(f.notes)
        rows.append(
            f"<tr><td>{_e(f.name)}</td><td>{_e(f.split)}</td><td>{_e(f.format)}</td><td>{f.rows_read}</td>"
            f"<td>{f.rows_kept}</td><td>{f.rows_dropped}</td><td>{_e(reasons)}</td><td>{_e(notes)}</td></tr>"
        )
    head = (
        "<tr><th>file</th><th>split</th><th>format</th><th>rows read</th><th>kept</th><th>dropped</th>"
        "<th>why dropped</th><th>notes</th></tr>"
    )
    return f'<table class="pf-files">{head}{"".join(rows)}</table>'


def _parts(parts: dict[str, float], unit: str) -> str:
    shown = [
        f"{_e(name.replace('_', ' '))} {value:.2f} {unit}"
        if unit == "GiB"
        else f"{_e(name.replace('_', ' '))} {clock(value)}"
        for name, value in parts.items()
    ]
    return " + ".join(shown)


def _time_range(timing: Any) -> str:
    """ " (range 6 min 30 s – 9 min 50 s; the CPU is busy: ...)" when the estimate has a range."""
    if getattr(timing, "low_seconds", None) is None:
        return ""
    load = f"; {_e(timing.load)}, the slow end if it stays so" if timing.load else ""
    return f" (range {clock(timing.low_seconds)} – {clock(timing.high_seconds)}{load})"


def _estimates(report: Any) -> str:
    lines = []
    memory, timing = report.memory, report.time
    if memory is not None:
        free = f" (free now: {memory.free_gib:.1f} GiB)" if memory.free_gib is not None else ""
        lines.append(
            f"<li><strong>Peak memory ≈ {memory.total_gib:.2f} GiB</strong> on {_e(memory.device)}{free}: "
            f"{_parts(memory.parts_gib, 'GiB')}. <span class='pf-basis'>{_e(memory.basis)}</span></li>"
        )
    if timing is not None:
        lines.append(
            f"<li><strong>Run time ≈ {clock(timing.total_seconds)}</strong>{_time_range(timing)} at "
            f"{timing.tokens_per_second:.0f} tokens/s: {_parts(timing.parts_seconds, 's')}. <span class='pf-basis'>speed: "
            f"{_e(timing.speed_source)}</span></li>"
        )
    if not lines and report.no_estimates:
        lines.append(f"<li>No estimates: {_e(report.no_estimates)}.</li>")
    return "".join(lines)


def _sample(sample: Any) -> str:
    spans = "".join(
        f'<span class="{"pf-trained" if s.trained else "pf-masked"}">{_e(s.text)}</span>' for s in sample.segments
    )
    cut = ", truncated" if sample.truncated else ""
    return (
        f'<div class="pf-sample"><div class="pf-sample-head">{_e(sample.file)} row {sample.row}: {sample.tokens} '
        f"tokens, {sample.trained_tokens} trained{cut}</div><pre>{spans}</pre></div>"
    )


def estimate_html(report: Any, progress: Any = None) -> str:
    """The "estimated from N of M rows" line with each figure's ± and, while the exact check runs,
    its progress bar (``progress``: ``admission.full_pass.FullPassState``); "" for an exact report."""
    if report.estimate is None:
        return ""
    margins = ", ".join(
        f"{_e(name.replace('_', ' '))} ±{value:,.0f}" for name, value in report.estimate.margins.items()
    )
    line = f'<p class="pf-estimate"><strong>Estimate</strong>: {_e(report.estimate.basis)}'
    line += f" ({margins})</p>" if margins else "</p>"
    if progress is None:
        return line
    if progress.state == "ended":
        return line + f'<p class="pf-warning">The exact check ended: {_e(progress.message)}</p>'
    return line + (
        f'<p>Exact check of every row: <progress class="pf-full-pass" value="{progress.progress:.3f}" max="1">'
        f"</progress> {100 * progress.progress:.0f} % ({progress.elapsed_seconds:.0f} s of about "
        f"{progress.expected_seconds:.0f} s, by the sample's rate)</p>"
    )


def report_html(report: Any, progress: Any = None) -> str:
    """The whole report as HTML (every value escaped: file names and rows are the user's); an
    estimated report leads with ``estimate_html``."""
    issues, ids = _issues(report)
    share = f"{100 * report.rows_truncated_share:.1f} %"
    totals = [
        f"<li><strong>{report.rows_kept}</strong> training rows kept of {report.rows_read} read "
        f"({report.rows_dropped} dropped, {report.rows_without_trained_tokens} without a trained token)"
        f"{f'; {report.eval_rows} evaluation rows' if report.eval_rows else ''}</li>"
    ]
    if report.tokenizer_found:
        totals.append(
            f"<li>{report.tokens_total} tokens, {html.escape(report.trained_words())}; "
            f"<strong>{report.rows_truncated} rows ({share}) longer than Max seq length "
            f"({report.max_seq_length})</strong>, {report.tokens_cut} tokens cut</li>"
        )
    totals.append(
        f"<li><strong>{report.total_steps} steps</strong> ({report.steps_per_epoch} per epoch × "
        f"{report.epochs_words()} epochs, {report.global_batch_size} rows per step)</li>"
    )
    if report.architecture:
        adapted = (
            f"; LoRA adapts <strong>{report.adapted_count}</strong> modules ({html.escape(report.adapted_modules)})"
            if report.adapted_modules
            else ""
        )
        totals.append(
            f"<li>{html.escape(report.architecture)}, attention {html.escape(report.attention or '')}{adapted}</li>"
        )
    if report.precision:
        totals.append(f"<li>Precision: {html.escape(report.precision)}</li>")
    if report.vision:
        totals.append(f"<li>{html.escape(report.vision[0].upper() + report.vision[1:])}</li>")
    if report.audio:
        totals.append(f"<li>{html.escape(report.audio[0].upper() + report.audio[1:])}</li>")
    if report.method:
        totals.append(f"<li>{html.escape(report.method)}</li>")
    if report.tools:
        totals.append(f"<li>{html.escape(report.tools)}</li>")
    samples = "".join(_sample(s) for s in report.samples)
    legend = (
        (
            '<p class="pf-legend"><span class="pf-trained">trained tokens</span> '
            '<span class="pf-masked">masked (not in the loss)</span></p>'
        )
        if samples
        else ""
    )
    marks = " ".join(ids)
    return (
        f'<div class="preflight" data-fields="{_e(marks)}">'
        f"<h3>Pre-flight check: {'refused' if report.errors else 'ready'} "
        f"<small>({report.check_seconds:.1f} s)</small></h3>{estimate_html(report, progress)}{issues}<ul>{''.join(totals)}{_estimates(report)}</ul>"
        f"{_files(report)}{legend}{samples}</div>"
    )


def _no_counts(report: Any) -> str:
    """Why a report has no token lengths, as far as it says."""
    if report.errors and not report.rows_read:
        return "the data could not be checked: see the error above"
    if not report.tokenizer_found:
        return "the model's tokenizer is not on this machine"
    return "no training rows"


def histogram_figure(report: Any) -> go.Figure:
    """Bars of rows per token-length bin, with a dashed line at Max seq length (rows right of it
    are truncated). An empty histogram says why."""
    edges, counts = report.histogram.edges, report.histogram.counts
    layout = dict(
        title="Token lengths of the training rows" + (" (estimated from a sample)" if report.estimate else ""),
        height=240,
        margin=dict(l=50, r=20, t=40, b=40),
        xaxis=dict(title="tokens per row"),
        yaxis=dict(title="rows"),
        bargap=0.05,
        showlegend=False,
    )
    if not counts:
        figure = go.Figure(layout=layout)
        figure.add_annotation(
            text=f"no token counts ({_no_counts(report)})",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
        )
        return figure
    centers = [(lo + hi) / 2 for lo, hi in zip(edges, edges[1:])]
    widths = [hi - lo for lo, hi in zip(edges, edges[1:])]
    bar = go.Bar(
        x=centers,
        y=counts,
        width=widths,
        marker_color="#2563eb",
        customdata=list(zip(edges, edges[1:])),
        hovertemplate="%{customdata[0]}–%{customdata[1]} tokens: %{y} rows<extra></extra>",
    )
    figure = go.Figure(data=[bar], layout=layout)
    figure.add_vline(
        x=report.max_seq_length,
        line_dash="dash",
        line_color="#b91c1c",
        annotation_text=f"Max seq length {report.max_seq_length}",
        annotation_position="top",
    )
    return figure
