"""The monitor's words: the status line of the one job (phase, step, times, ETA, tokens/s, loss, the
stage and its clocks before the first step) and the progress bar, as Markdown / HTML."""

from __future__ import annotations

from typing import Optional

from trainer_core.status import TrainingStatus


def clock(seconds: Optional[float]) -> str:
    """Seconds as ``2m 05s`` (``1h 02m 03s`` from an hour; ``-`` for None)."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def phase_label(status: TrainingStatus) -> str:
    """The phase as the page says it: ``cancelled`` for a stopped job that was cancelled (nothing
    saved), else the phase's value."""
    if status.phase.value == "stopped" and status.details.get("end_reason") == "cancelled":
        return "cancelled"
    return status.phase.value


def status_line(status: TrainingStatus) -> str:
    """Markdown: phase, step / total, percent, training time (continued over resumes), wall time
    (since the run was created, idle gaps included), ETA, tokens/s, last loss, then the message."""
    d = status.details
    parts = [f"**{phase_label(status)}**"]
    if d.get("step") is not None:
        total = d.get("total_steps") or 0
        parts.append(f"step {d['step']} / {total} ({100 * d['step'] / max(total, 1):.0f}%)")
        parts.append(f"training {clock(d.get('elapsed_seconds'))}")
        if d.get("wall_seconds") is not None:
            parts.append(f"wall {clock(d.get('wall_seconds'))}")
        if status.is_training_running:
            parts.append(d["evaluating"] if d.get("evaluating") else eta_text(d))
        if d.get("tokens_per_second"):
            parts.append(f"{d['tokens_per_second']:.0f} tokens/s")
        if d.get("loss") is not None:
            parts.append(f"loss {d['loss']:.4f}")
    elif status.is_training_running and d.get("evaluating"):  # before the first step: the base's evaluation
        parts.append(d["evaluating"])
    elif status.is_training_running:
        parts += startup_parts(status.phase.value, d)
    if d.get("truncated_rows") or d.get("dropped_rows"):
        parts.append(
            f"{d.get('truncated_rows', 0)} of {d.get('rows', 0) + d.get('dropped_rows', 0)} rows truncated "
            f"to {d.get('max_seq_length')} tokens, {d.get('dropped_rows', 0)} dropped"
        )
    text = " · ".join(parts) + f"\n\n{status.message}"
    if status.is_training_running and d.get("step") is not None:
        text += "\n\n" + progress_bar(d["step"] / max(d.get("total_steps") or 0, 1))
    elif status.is_training_running and (phase := d.get("phase_progress")):
        done, total = phase.get("done", 0), max(phase.get("total") or 0, 1)
        text += f"\n\n{done:,} of {total:,} {phase.get('unit', '')}\n\n" + progress_bar(done / total)
    if status.error:
        text += f"\n\n**Error:** {status.error}"
    return text


# What a run does between Start and its first step, in order: the monitor names the stage it is in.
STARTUP_STAGES = {
    "loading_model": "loading the model",
    "loading_dataset": "reading and tokenizing the data",
    "configuring": "building the trainer",
    "training": "the first step",
}


def ticking(seconds: Optional[float]) -> str:
    """``seconds`` as ``clock`` writes them, in a span the page's script counts up every second
    (``ui.page_assets``: ``.tick[data-seconds]``) until the next update replaces it."""
    value = max(0.0, float(seconds or 0.0))
    return f'<span class="tick" data-seconds="{value:.1f}">{clock(value)}</span>'


def startup_parts(phase: str, details: dict) -> list[str]:
    """The monitor's words before the first step: the stage (``STARTUP_STAGES``, numbered), the
    time in it and since Start, both counting up on the page."""
    stages = list(STARTUP_STAGES)
    if phase not in STARTUP_STAGES:
        return []
    parts = [f"stage {stages.index(phase) + 1} of {len(stages)}: {STARTUP_STAGES[phase]}"]
    parts.append(f"{ticking(details.get('phase_seconds'))} in this stage")
    if details.get("session_seconds") is not None:
        parts.append(f"{ticking(details.get('session_seconds'))} since Start")
    return parts


def eta_text(details: dict) -> str:
    """``ETA 17m 02s (15m 40s – 19m 10s)``: the worker's estimate and its spread
    (``training.eta``); before 3 steps are timed, the check's estimate from earlier runs
    (``eta_check_seconds``, less the training time so far), or that it comes after the first steps."""
    eta = details.get("eta_seconds")
    if eta is None:
        check = details.get("eta_check_seconds")  # the check's estimate, from earlier runs' speed
        if check is None:
            return "ETA after 3 steps"
        return f"ETA ~{clock(max(check - (details.get('elapsed_seconds') or 0.0), 0.0))} (earlier runs' speed)"
    low, high = details.get("eta_low_seconds"), details.get("eta_high_seconds")
    spread = f" ({clock(low)} – {clock(high)})" if low is not None and high is not None and high > low else ""
    return f"ETA {clock(eta)}{spread}"


def progress_bar(fraction: float) -> str:
    """An HTML progress bar (``<progress class="run-progress">``) for ``fraction`` 0..1."""
    value = max(0.0, min(1.0, float(fraction)))
    return f'<progress class="run-progress" value="{value:.3f}" max="1">{100 * value:.0f}%</progress>'
