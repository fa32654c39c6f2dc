"""The evaluation itself, for the task worker process (``run_evaluation``) and the CLI (``evaluate``).

Steps: read the planned rows (``sources``), load the model choice (``serving.loader``), keep the
first ``max_rows`` rows (default: all on a GPU, the first ``CPU_DEFAULT_ROWS`` on CPU), then for the
chosen model and, with ``compare_base``, its base (the same weights with the adapter off): the loss
on the answers (``loss``), greedy answers (``generation``) and their scores (``scoring``; rows with
tools also their calls, ``tool_calls``). Writes
``predictions.jsonl`` and ``scores.json`` into ``context["output_dir"]`` and returns an
``EvaluationResult``. A model kind with its own evaluation (``ModelKind.evaluation``; the plan's
``kind``) runs that instead. ``should_stop`` is checked between batches (and at each decoding step);
a stopped evaluation returns None and writes nothing.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.files import DatasetError
from trainer_core.evaluation.cached_tokens import cached_loss_rows
from trainer_core.evaluation.generation import generate_answers
from trainer_core.evaluation.loss import answer_loss, tokenize_rows
from trainer_core.evaluation.report import SCORES_FILE, Outcome, prediction_rows, write_atomic, write_predictions
from trainer_core.evaluation.rows import EvalRow, to_rows
from trainer_core.evaluation.schemas import CPU_DEFAULT_ROWS, EvaluateRequest, EvaluationResult
from trainer_core.evaluation.scoring import score_answers
from trainer_core.evaluation.sources import read_plan
from trainer_core.evaluation.tool_calls import answer_format, score_tool_answers
from trainer_core.model_kind import kind_named

log = logging.getLogger(__name__)
Progress = Callable[[float, str], None]  # (fraction 0..1, message)
LOAD_SHARE, WRITE_SHARE = 0.05, 0.02  # of the progress bar; the batches share the rest
NEW_TOKENS_PER_UNIT = 16  # progress weights: a generation batch counts max_new_tokens / 16 loss batches


def row_limit(max_rows: Optional[int], available: int, device: str) -> tuple[int, list[str]]:
    """(rows to evaluate, notes): ``max_rows`` when given, else all on a GPU and the first
    CPU_DEFAULT_ROWS on CPU (said in a note)."""
    if max_rows is not None:
        return min(max_rows, available), []
    if device == "cpu" and available > CPU_DEFAULT_ROWS:
        return CPU_DEFAULT_ROWS, [
            f"CPU: evaluated the first {CPU_DEFAULT_ROWS} of {available} rows; set max_rows for more"
        ]
    return available, []


class _Bar:
    """Progress over weighted units of work, mapped between LOAD_SHARE and 1 - WRITE_SHARE."""

    def __init__(self, progress: Progress, units: float) -> None:
        self.progress, self.units, self.done = progress, max(units, 1e-9), 0.0

    def step(self, units: float, message: str) -> None:
        """``units`` more are done."""
        self.done += units
        self.at(self.done, message)

    def at(self, units: float, message: str) -> None:
        """Progress at ``units`` done (a point within the current piece of work; ``done`` unchanged)."""
        self.progress(LOAD_SHARE + (1 - LOAD_SHARE - WRITE_SHARE) * min(units / self.units, 1.0), message)


def _fitting(
    rows: list[EvalRow], loaded: Any, max_new_tokens: int, evaluator: Any
) -> tuple[list[EvalRow], list[list[int]], int]:
    """(rows whose prompt leaves room for max_new_tokens in the model's context, their prompt ids
    (rows the model kind's ``evaluator`` reads, e.g. with images: empty, their inputs are made per
    row), rows left out)."""
    from trainer_core.data.preference_tokens import prompt_ids
    from trainer_core.serving.generate import render_prompt

    kept, prompts = [], []
    for row in rows:
        if evaluator is not None:
            ids, length = [], evaluator.prompt_length(row)
        else:
            tools = row.tools  # with tools: rendered as training rendered them (data.tool_rows)
            ids = (
                prompt_ids(loaded.tokenizer, row.prompt, row.index + 1, tools)
                if tools
                else render_prompt(loaded.tokenizer, row.prompt)
            )
            length = len(ids)
        if length + max_new_tokens <= loaded.context_tokens:
            kept.append(row)
            prompts.append(ids)
    return kept, prompts, len(rows) - len(kept)


def _run_model(
    model: Any,
    name: str,
    loaded: Any,
    encoded: Any,
    prompts: list[list[int]],
    rows: list[EvalRow],
    request: EvaluateRequest,
    bar: _Bar,
    should_stop: Callable[[], bool],
    evaluator: Any = None,
) -> Optional[Outcome]:
    """Loss, answers and scores of one model (None when stopped): in the text path's batches, or
    row by row through the model kind's ``evaluator`` (``ModelKind.evaluator``: e.g. with images)."""
    from trainer_core.serving.generate import stop_token_ids

    def loss_batch(done: int, total: int) -> None:
        bar.step(1, f"{name}: loss on the answers, batch {done}/{total}")

    per_batch = max(1.0, request.max_new_tokens / NEW_TOKENS_PER_UNIT)  # progress units of a generation batch
    batches = -(-len(prompts) // request.batch_size)

    def answer_batch(done: int, total: int) -> None:
        rows_done = min(done * request.batch_size, len(prompts))
        bar.step(per_batch, f"{name}: generating, batch {done}/{total} ({rows_done}/{len(prompts)} rows)")

    def answer_tokens(batch: int, new: int) -> None:  # within a batch: its share by tokens generated
        bar.at(
            bar.done + per_batch * min(new / request.max_new_tokens, 1.0),
            f"{name}: generating, batch {batch}/{batches}, {new} of at most {request.max_new_tokens} new tokens",
        )

    def answer_row(done: int, total: int) -> None:  # the kind's rows: all answers count as the batches would
        bar.step(per_batch * batches / max(total, 1), f"{name}: generating, row {done}/{total}")

    device, pad, stops = loaded.device, loaded.tokenizer.pad_token_id, stop_token_ids(loaded.tokenizer, model)
    if evaluator is not None:
        loss = evaluator.loss(model, rows, device, request.batch_size, should_stop, loss_batch)
    else:
        loss = answer_loss(model, encoded, pad, device, request.batch_size, should_stop, loss_batch)
    if loss is None:
        return None
    if evaluator is not None:
        generated = evaluator.answers(model, rows, request.max_new_tokens, stops, device, should_stop, answer_row)
    else:
        generated = generate_answers(
            model, loaded.tokenizer, prompts, request.max_new_tokens, request.batch_size, stops, device, should_stop,
            answer_batch, answer_tokens,
        )  # fmt: skip
    if generated is None:
        return None
    texts = [a.text for a in generated.answers]
    raws = [a.raw or a.text for a in generated.answers]  # call markers kept
    calls = score_tool_answers(raws, rows, answer_format(loaded.tokenizer))
    return Outcome(loss, generated, score_answers(texts, [r.reference for r in rows]), calls)


def _notes(
    skipped: int,
    too_long: int,
    truncated: int,
    dropped: int,
    max_seq_length: int,
    outcomes: dict[str, Outcome],
    request: EvaluateRequest,
) -> list[str]:
    notes = []
    if skipped:
        notes.append(f"{skipped} rows have no assistant answer after a prompt and were skipped")
    if too_long:
        notes.append(
            f"{too_long} rows have prompts too long for the model's context with "
            f"max_new_tokens={request.max_new_tokens}; left out"
        )
    if truncated:
        notes.append(
            f"{truncated} rows are longer than max_seq_length={max_seq_length} tokens; their loss covers "
            f"the first {max_seq_length}"
        )
    if dropped:
        notes.append(f"{dropped} rows have no answer token within max_seq_length={max_seq_length}; not in the loss")
    for name, outcome in outcomes.items():
        if outcome.cut_answers():
            notes.append(
                f"{outcome.cut_answers()} {name} answers reached max_new_tokens={request.max_new_tokens} "
                "(cut short); raise it for complete answers"
            )
    return notes


def evaluate(
    request: dict[str, Any],
    context: dict[str, Any],
    progress: Progress = lambda f, m: None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Optional[EvaluationResult]:
    """Run the evaluation described in the module docstring. ``context`` holds ``choice``
    (``ModelChoice`` as a dict), ``models_dir``, ``output_dir`` and ``data`` (a plan from
    ``sources.plan_data``). Raises DatasetError, ModelLoadError or ChatInputError for bad input."""
    from trainer_core.serving.loader import load_choice
    from trainer_core.serving.schemas import ModelChoice

    own = kind_named(context["data"].get("kind")).evaluation()
    if own is not None:  # the model kind evaluates its own way (an embedding model: retrieval metrics)
        return own.run(request, context, progress, should_stop)
    began, req = time.monotonic(), EvaluateRequest.model_validate(request)
    choice, plan = ModelChoice(**context["choice"]), context["data"]
    progress(0.0, f"Reading {plan['source']}")
    canonical = read_plan(plan)
    all_rows, skipped = to_rows(canonical, plan["source"])
    progress(0.01, f"Loading {choice.id}")
    loaded = load_choice(choice, Path(context["models_dir"]))
    limit, notes = row_limit(req.max_rows, len(all_rows), loaded.device)
    evaluator = loaded.kind.evaluator(loaded.extra.get("processor"))  # None: the text path's batches
    rows, prompts, too_long = _fitting(all_rows[:limit], loaded, req.max_new_tokens, evaluator)
    if not rows:
        raise DatasetError(
            f"no row's prompt fits the model's context of {loaded.context_tokens} tokens with "
            f"max_new_tokens={req.max_new_tokens}: lower max_new_tokens"
        )
    if evaluator is not None:  # the kind's rows are encoded batch by batch (with their images)
        encoded, truncated, dropped = None, 0, 0
    else:
        from_cache = cached_loss_rows(plan, rows, canonical, loaded.tokenizer)
        encoded, truncated, dropped = from_cache or tokenize_rows(rows, loaded.tokenizer, plan["max_seq_length"])
    sides = [("tuned", True)] + ([("base", False)] if req.compare_base and choice.kind != "base" else [])
    batches = -(-len(rows) // req.batch_size)
    bar = _Bar(progress, len(sides) * batches * (1 + max(1.0, req.max_new_tokens / NEW_TOKENS_PER_UNIT)))
    outcomes: dict[str, Outcome] = {}
    for name, use_adapter in sides:
        with loaded.weights(use_adapter) as model:
            outcome = _run_model(model, name, loaded, encoded, prompts, rows, req, bar, should_stop, evaluator)
        if outcome is None:
            return None
        outcomes[name] = outcome
    notes += _notes(skipped, too_long, truncated, dropped, plan["max_seq_length"], outcomes, req)
    if choice.kind == "base":
        notes.append("the base model itself was evaluated (its scores are under tuned); compare_base does not apply")
    progress(1 - WRITE_SHARE, "Writing predictions.jsonl")
    folder = Path(context["output_dir"])
    path = write_predictions(folder, prediction_rows(rows, outcomes["tuned"], outcomes.get("base")))
    generated = [o.generated for o in outcomes.values()]
    seconds = sum(g.seconds for g in generated)
    result = EvaluationResult(
        rows_evaluated=len(rows),
        rows_available=len(all_rows),
        tuned=outcomes["tuned"].scores(),
        base=outcomes["base"].scores() if "base" in outcomes else None,
        predictions_file=path.name,
        seconds=round(time.monotonic() - began, 2),
        source=plan["source"],
        device=loaded.device,
        notes=notes,
        tokens_per_second=sum(g.tokens for g in generated) / seconds if seconds > 0 else None,
    )
    write_atomic(folder / SCORES_FILE, result.model_dump_json(indent=2))
    log.info("evaluated %s on %d rows in %.1f s: %s", choice.id, len(rows), result.seconds, result.tuned)
    return result


def failure(exc: BaseException) -> tuple[str, str]:
    """(message, kind) for an exception: kind ``input`` for bad data, model or settings (the message
    as is), else ``internal`` (type and the head of the message; out of memory with the fix)."""
    if type(exc).__name__ in ("DatasetError", "ModelLoadError", "ChatInputError", "ValidationError"):
        return str(exc), "input"
    text = str(exc).strip()
    if "out of memory" in text.lower() or "can't allocate memory" in text.lower():
        return f"Out of memory: {text[:300]} Lower batch_size or max_new_tokens.", "internal"
    return f"{type(exc).__name__}: {text[:600]}", "internal"


def run_evaluation(request: dict[str, Any], context: dict[str, Any], events: Any, stop: Any) -> None:
    """Task worker entry point (``TaskRunner.start``). Never raises: sends progress events, then one
    ``result`` (``EvaluationResult`` as a dict) or one ``error`` (``{"message", "kind"}``; kind
    ``cancelled`` after a Cancel)."""
    from trainer_core.process.parent import exit_with_parent
    from trainer_core.serving.worker import quiet_libraries
    from trainer_core.tasks.schemas import TaskEvent

    exit_with_parent()
    try:
        import datasets

        datasets.disable_progress_bars()
        quiet_libraries()
        result = evaluate(
            request, context, lambda f, m: events.put((TaskEvent.PROGRESS, {"fraction": f, "message": m})), stop.is_set
        )
    except BaseException as exc:  # noqa: BLE001 - the process boundary: report everything
        log.error("evaluation failed:\n%s", traceback.format_exc())
        message, kind = failure(exc)
        events.put((TaskEvent.ERROR, {"message": message, "kind": kind}))
        return
    if result is None:
        events.put((TaskEvent.ERROR, {"message": "cancelled", "kind": "cancelled"}))
    else:
        events.put((TaskEvent.RESULT, result.model_dump()))
