"""Evaluating an audio-in chat model after training (``AUDIO_CHAT.evaluation()``: the Evaluate tab,
the CLI's ``evaluate``, the API; in the evaluation worker) on the held-out rows: the run's own
(``data.prepare.eval_conversations``: its ``val_size`` split, evaluation files or Hub split) or the
files given (read with the run's ``max_audio_seconds``), each a prompt with its clips and a
reference answer (its last assistant turn, ``evaluation.rows.to_rows``). For the chosen model and
its base (the adapter off, or a full fine-tune's base beside it), row by row: the loss on the answer
tokens (nats per token; the collator's labels: answers scored, prompt and audio tokens never;
perplexity = exp(loss)) and the greedy answer to the prompt with its clips, scored by word and
character error rate against the reference (``kinds.speech_to_text.evaluation.error_rates``).

``predictions.jsonl``: one object per row: ``index``, ``prompt``, ``audio`` (the clips' file names;
"data: URL" for inline audio), ``reference``, ``tuned_answer`` / ``base_answer`` (null when not
compared), ``wer_tuned`` / ``wer_base`` (the row's own WER), ``tuned_tokens`` / ``base_tokens``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.audio import MARKER
from trainer_core.data.errors import DatasetError
from trainer_core.evaluation.generation import cut_at_stop
from trainer_core.evaluation.loss import LossResult
from trainer_core.evaluation.report import PREDICTIONS_FILE, SCORES_FILE, write_atomic
from trainer_core.evaluation.rows import EvalRow, to_rows
from trainer_core.evaluation.schemas import EvaluateRequest, EvaluationResult, Scores
from trainer_core.kinds.speech_to_text.evaluation import error_rates
from trainer_core.schemas import TrainingStartRequest

log = logging.getLogger(__name__)
Progress = Callable[[float, str], None]  # (fraction 0..1, message)
LOAD_SHARE, WRITE_SHARE = 0.05, 0.03  # of the progress bar; the rows share the rest
RUN_FIELDS = ("max_audio_seconds",)  # the run's settings that files given are read with


@dataclass
class AudioRow:
    """One held-out row: its prompt and reference (``row``) and the prompt's clips (canonical
    references, one per ``<audio>`` marker of the prompt, in order)."""

    row: EvalRow
    clips: list[str]

    @property
    def names(self) -> str:
        """The clips' file names, for people ("data: URL" for inline audio)."""
        return ", ".join("data: URL" if ref.startswith("data:") else Path(ref).name for ref in self.clips)


@dataclass
class Side:
    """What one model measured over the rows: summed loss, answers, generated tokens and seconds."""

    loss: LossResult = field(default_factory=lambda: LossResult(0.0, 0))
    answers: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    cut: int = 0  # answers that reached max_new_tokens
    seconds: float = 0.0  # inside generate


def plan_request(plan: dict[str, Any]) -> TrainingStartRequest:
    """The request whose rows the plan names: the run's own, or the files given with the run's
    ``RUN_FIELDS``."""
    if "files" in plan:
        return TrainingStartRequest(local_datasets=plan["files"], **plan.get("run_fields", {}))
    return TrainingStartRequest.model_validate(plan["run_request"])


def read_rows(plan: dict[str, Any], kind: Any) -> tuple[list[AudioRow], int]:
    """(the planned held-out rows with a prompt, a non-blank answer and the prompt's clips, rows
    skipped). Raises DatasetError naming the file and row (a clip that cannot be used, no answers)."""
    from trainer_core.data.prepare import eval_conversations, load_conversations

    request = plan_request(plan)
    if "files" in plan:
        dataset = load_conversations(request, kind=kind)[0]
    else:
        dataset = eval_conversations(request)
    rows, skipped = to_rows(dataset, plan["source"])
    audios = dataset["audios"] if "audios" in dataset.column_names else [[] for _ in range(len(dataset))]
    out = []
    for row in rows:
        if not row.reference.strip():  # jiwer cannot score against an empty reference
            skipped += 1
            continue
        shown = sum(turn["content"].count(MARKER) for turn in row.prompt)  # the answer's own clips are not input
        out.append(AudioRow(row, list(audios[row.index] or [])[:shown]))
    if not out:
        raise DatasetError(f"{plan['source']} has no row with an answer to score", fields=("datasets",))
    return out, skipped


def row_loss(model: Any, collator: Any, item: AudioRow, device: str) -> LossResult:
    """Summed cross-entropy (nats) over the answer tokens of ``item``'s conversation with its clips
    (the collator's labels: answers only, audio tokens never), as ``evaluation.loss`` counts it."""
    import torch
    import torch.nn.functional as F

    inputs = collator([{"messages": item.row.conversation, "audios": item.clips}])
    labels = inputs.pop("labels").to(device)  # (1, T)
    with torch.inference_mode():
        logits = model(**{k: v.to(device) for k, v in inputs.items()}, use_cache=False).logits  # (1, T, V)
    targets = labels[:, 1:]  # the logit at t predicts token t + 1
    wanted = targets != -100
    nats = F.cross_entropy(logits[:, :-1][wanted].float(), targets[wanted], reduction="sum")
    return LossResult(float(nats), int(wanted.sum()))


def row_answer(
    model: Any, collator: Any, item: AudioRow, max_new_tokens: int, stops: list[int], device: str
) -> tuple[str, int, str, float]:
    """(greedy answer, tokens generated with the stop token, finish: stop | length, seconds in
    ``generate``) to ``item``'s prompt with its clips, as chat makes the inputs
    (``serving.media_prompt.prompt_text``: the chat template with the generation prompt)."""
    import torch

    from trainer_core.serving.generate import generate_kwargs
    from trainer_core.serving.media_prompt import prompt_text
    from trainer_core.serving.schemas import GenerationSettings

    processor = collator.processor
    text = prompt_text(processor, item.row.prompt, MARKER, "audio")
    media = collator.media_inputs([[collator.load(ref) for ref in item.clips]])
    inputs = processor(text=[text], **media, add_special_tokens=False, return_tensors="pt")
    inputs = {key: value.to(device) for key, value in inputs.items()}
    kwargs = generate_kwargs(GenerationSettings(temperature=0, max_new_tokens=max_new_tokens))
    began = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(**inputs, eos_token_id=stops, pad_token_id=processor.tokenizer.pad_token_id, **kwargs)
    new = output[0, inputs["input_ids"].shape[1] :].tolist()  # .tolist() waits for the device
    seconds = time.perf_counter() - began
    kept, finish = cut_at_stop(new, set(stops), max_new_tokens)
    return processor.tokenizer.decode(kept, skip_special_tokens=True).strip(), len(kept), finish, seconds


def run_side(
    model: Any,
    name: str,
    collator: Any,
    rows: list[AudioRow],
    request: EvaluateRequest,
    stops: list[int],
    device: str,
    step: Callable[[str], None],
    should_stop: Callable[[], bool],
) -> Optional[Side]:
    """One model's loss and answer on every row (``step(message)`` after each row); None when
    ``should_stop()`` turns true between rows."""
    side = Side()
    for i, item in enumerate(rows):
        if should_stop():
            return None
        loss = row_loss(model, collator, item, device)
        side.loss = LossResult(side.loss.nats + loss.nats, side.loss.tokens + loss.tokens)
        text, tokens, finish, seconds = row_answer(model, collator, item, request.max_new_tokens, stops, device)
        side.answers.append(text)
        side.tokens.append(tokens)
        side.cut += finish == "length"
        side.seconds += seconds
        step(f"{name}: row {i + 1} of {len(rows)} (loss and answer)")
    return side


def scores(side: Side, references: list[str]) -> tuple[Scores, list[float]]:
    """(the side's ``Scores``: loss, perplexity, WER, CER, tokens; each row's WER)."""
    wer, cer, each = error_rates(references, side.answers)
    generated = sum(side.tokens)
    result = Scores(
        loss=side.loss.loss,
        perplexity=side.loss.perplexity,
        wer=round(wer, 6),
        cer=round(cer, 6),
        answer_tokens=side.loss.tokens,
        generated_tokens=generated,
        tokens_per_second=generated / side.seconds if side.seconds > 0 else None,
    )
    return result, each


def prediction_rows(rows: list[AudioRow], sides: dict[str, Side], each: dict[str, list[float]]) -> list[dict]:
    """The predictions table (see the module docstring)."""
    table = []
    for k, item in enumerate(rows):
        line = {"index": item.row.index, "prompt": item.row.prompt_text, "audio": item.names}
        line["reference"] = item.row.reference
        for name in ("tuned", "base"):
            side = sides.get(name)
            line[f"{name}_answer"] = side.answers[k] if side else None
            line[f"wer_{name}"] = each[name][k] if side else None
            line[f"{name}_tokens"] = side.tokens[k] if side else None
        table.append(line)
    return table


class AudioChatEvaluation:
    """The audio-in chat kind's evaluation (``ModelKind.evaluation``'s object); ``kind``: that kind
    (files given are read as its rows, their clips kept)."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind

    def plan(self, plan: dict[str, Any], run_request: Optional[TrainingStartRequest]) -> dict[str, Any]:
        """``plan`` with, for files given, the run's ``max_audio_seconds``; its rows read once now
        (a bad file or clip refused before any model loads; Hub data is left to the worker).
        Raises DatasetError."""
        plan = dict(plan)
        if "files" in plan and run_request is not None:
            plan["run_fields"] = {name: getattr(run_request, name) for name in RUN_FIELDS}
        if "files" in plan or not plan["run_request"].get("hf_dataset"):
            read_rows(plan, self.kind)
        return plan

    def run(
        self,
        request: dict[str, Any],
        context: dict[str, Any],
        progress: Progress,
        should_stop: Callable[[], bool],
    ) -> Optional[EvaluationResult]:
        """Loss, WER and CER of the choice (and its base, with ``compare_base``) on the planned rows,
        progress after every row; writes ``predictions.jsonl`` and ``scores.json`` into
        ``context["output_dir"]``. None when stopped. Raises DatasetError, ModelLoadError,
        ChatInputError."""
        from trainer_core.evaluation.worker import row_limit
        from trainer_core.kinds.audio_chat.collator import AudioChatCollator
        from trainer_core.serving.generate import stop_token_ids
        from trainer_core.serving.loader import load_choice
        from trainer_core.serving.schemas import ModelChoice

        began, req = time.monotonic(), EvaluateRequest.model_validate(request)
        choice, plan = ModelChoice(**context["choice"]), context["data"]
        progress(0.0, f"Reading {plan['source']}")
        all_rows, skipped = read_rows(plan, self.kind)
        progress(0.01, f"Loading {choice.id}")
        loaded = load_choice(choice, Path(context["models_dir"]))
        limit, notes = row_limit(req.max_rows, len(all_rows), loaded.device)
        rows = all_rows[:limit]
        # whole rows (no cut inside a clip), the answers scored; clips at the feature extractor's rate
        collator = AudioChatCollator(loaded.extra["processor"], None, True, plan_request(plan).max_audio_seconds)
        wanted = [("tuned", True)] + ([("base", False)] if req.compare_base and choice.kind != "base" else [])
        done, total = [0], len(wanted) * len(rows)

        def step(message: str) -> None:
            done[0] += 1
            progress(LOAD_SHARE + (1 - LOAD_SHARE - WRITE_SHARE) * done[0] / total, message)

        sides: dict[str, Side] = {}
        for name, use_adapter in wanted:
            with loaded.weights(use_adapter) as model:
                stops = stop_token_ids(loaded.tokenizer, model)
                side = run_side(model, name, collator, rows, req, stops, loaded.device, step, should_stop)
            if side is None:
                return None
            sides[name] = side
        progress(1 - WRITE_SHARE, f"Writing {PREDICTIONS_FILE}")
        notes += _notes(skipped, sides, req, choice.kind == "base")
        result = write_result(Path(context["output_dir"]), rows, sides, len(all_rows), notes)
        result.seconds, result.source, result.device = round(time.monotonic() - began, 2), plan["source"], loaded.device
        write_atomic(Path(context["output_dir"]) / SCORES_FILE, result.model_dump_json(indent=2))
        log.info("evaluated audio chat %s on %d rows in %.1f s: %s", choice.id, len(rows), result.seconds, result.tuned)
        return result


def write_result(
    folder: Path, rows: list[AudioRow], sides: dict[str, Side], available: int, notes: list[str]
) -> EvaluationResult:
    """The ``EvaluationResult`` of ``sides`` over ``rows`` (scored against their references), with
    ``predictions.jsonl`` written into ``folder``."""
    references = [item.row.reference for item in rows]
    measured = {name: scores(side, references) for name, side in sides.items()}
    table = prediction_rows(rows, sides, {name: each for name, (_, each) in measured.items()})
    write_atomic(folder / PREDICTIONS_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in table))
    seconds = sum(side.seconds for side in sides.values())
    return EvaluationResult(
        rows_evaluated=len(rows),
        rows_available=available,
        tuned=measured["tuned"][0],
        base=measured["base"][0] if "base" in measured else None,
        tokens_per_second=sum(sum(s.tokens) for s in sides.values()) / seconds if seconds > 0 else None,
        notes=notes,
    )


def _notes(skipped: int, sides: dict[str, Side], request: EvaluateRequest, is_base: bool) -> list[str]:
    notes = [f"{skipped} rows have no answer after a prompt (or an empty one) and were skipped"] if skipped else []
    for name, side in sides.items():
        if side.cut:
            notes.append(
                f"{side.cut} {name} answers reached max_new_tokens={request.max_new_tokens} (cut short); raise it for "
                "complete answers"
            )
    if is_base:
        notes.append("the base model itself was evaluated (its scores are under tuned)")
    return notes
