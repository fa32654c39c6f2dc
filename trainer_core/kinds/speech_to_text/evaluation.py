"""Evaluating a speech-to-text model after training (``SPEECH_TO_TEXT.evaluation()``: the Evaluate tab
and the CLI's ``evaluate``, in the evaluation worker): the held-out clips (``data.held_out_rows``:
the run's own ``val_size`` split or evaluation data, or the files given, with the run's
``custom_format_mapping`` where the files have those columns), transcribed greedily by the chosen
model and its base (the adapter switched off, or a full fine-tune's base loaded beside it) in the
run's language and task (``serve.transcribe``), and scored by word and character error rate
(jiwer, over all clips: errors / reference words or characters; 0 is perfect, above 1 possible).

``predictions.jsonl`` holds one object per clip: ``index``, ``audio`` (the file's name; "data: URL"
for inline audio), ``reference``, ``tuned_answer`` / ``base_answer`` (null when not compared) and
``wer_tuned`` / ``wer_base`` (the clip's own word error rate).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.errors import DatasetError
from trainer_core.evaluation.kind_result import write_result
from trainer_core.evaluation.report import PREDICTIONS_FILE
from trainer_core.evaluation.schemas import EvaluateRequest, EvaluationResult, Scores
from trainer_core.schemas import TrainingStartRequest

log = logging.getLogger(__name__)
Progress = Callable[[float, str], None]  # (fraction 0..1, message)


def _request(plan: dict[str, Any]) -> Any:
    """The ``TrainingStartRequest`` whose held-out rows the plan names."""
    if "files" in plan:
        return TrainingStartRequest(
            local_datasets=plan["files"], custom_format_mapping=plan.get("custom_format_mapping") or {}
        )
    return TrainingStartRequest.model_validate(plan["run_request"])


def read_rows(plan: dict[str, Any]) -> Any:
    """The planned held-out clips (columns ``audio``, ``text``, ``seconds``); raises DatasetError
    naming the file and row."""
    from trainer_core.kinds.speech_to_text.data import held_out_rows
    from trainer_core.settings import get_settings

    rows = held_out_rows(_request(plan), list(get_settings().allowed_roots))
    if len(rows) == 0:
        raise DatasetError(f"{plan['source']} has no clips to evaluate", fields=("datasets",))
    return rows


def error_rates(references: list[str], hypotheses: list[str]) -> tuple[float, float, list[float]]:
    """(WER, CER over all pairs, each pair's WER) by jiwer; an empty hypothesis counts every
    reference word as deleted."""
    import jiwer

    total_wer = jiwer.wer(references, hypotheses)
    total_cer = jiwer.cer(references, hypotheses)
    each = [jiwer.wer(ref, hyp) for ref, hyp in zip(references, hypotheses)]
    return float(total_wer), float(total_cer), [round(float(v), 6) for v in each]


def _name(reference: str) -> str:
    return "data: URL" if reference.startswith("data:") else Path(reference).name


class SpeechEvaluation:
    """The speech-to-text kind's evaluation (``ModelKind.evaluation``'s object)."""

    def plan(self, plan: dict[str, Any], run_request: Optional[TrainingStartRequest]) -> dict[str, Any]:
        """``plan`` with the run's ``language`` / ``task`` (and, for files given, its
        ``custom_format_mapping``), its clips read once now (a bad file refused before any model
        loads; Hub data is left to the worker). Raises DatasetError."""
        plan = dict(plan)
        plan["language"] = getattr(run_request, "language", None)
        plan["task"] = getattr(run_request, "task", None) or "transcribe"
        if "files" in plan:
            plan["custom_format_mapping"] = dict(getattr(run_request, "custom_format_mapping", None) or {})
        if "files" in plan or not plan["run_request"].get("hf_dataset"):
            read_rows(plan)
        return plan

    def run(
        self,
        request: dict[str, Any],
        context: dict[str, Any],
        progress: Progress,
        should_stop: Callable[[], bool],
    ) -> Optional[EvaluationResult]:
        """WER and CER of the choice (and its base, with ``compare_base``) on the planned clips;
        writes ``predictions.jsonl`` and ``scores.json`` into ``context["output_dir"]``. None when
        stopped. Raises DatasetError, ModelLoadError."""
        from trainer_core.data.audio import read_audio
        from trainer_core.kinds.speech_to_text.serve import SpeechServer, transcribe
        from trainer_core.serving.schemas import ModelChoice

        began, req = time.monotonic(), EvaluateRequest.model_validate(request)
        choice, plan = ModelChoice(**context["choice"]), context["data"]
        progress(0.0, f"Reading {plan['source']}")
        rows = read_rows(plan)
        available = len(rows)
        rows = rows.select(range(min(req.max_rows or available, available)))
        progress(0.02, f"Loading {choice.id}")
        server = SpeechServer(choice, Path(context["models_dir"]))
        rate = server.processor.feature_extractor.sampling_rate
        sides = [("tuned", True)] + ([("base", False)] if req.compare_base and choice.kind != "base" else [])
        answers: dict[str, list[str]] = {name: [] for name, _ in sides}
        tokens = {name: 0 for name, _ in sides}
        seconds = {name: 0.0 for name, _ in sides}
        for i, row in enumerate(rows):
            clip = read_audio(row["audio"], sampling_rate=rate)
            for name, use_adapter in sides:
                if should_stop():
                    return None
                progress(0.05 + 0.9 * i / len(rows), f"{name}: clip {i + 1} of {len(rows)}")
                start = time.perf_counter()
                text, count = transcribe(
                    server.model, server.processor, clip, plan["language"], plan["task"], use_adapter
                )
                seconds[name] += time.perf_counter() - start
                answers[name].append(text)
                tokens[name] += count
        references = list(rows["text"])
        scores, each = {}, {}
        for name, _ in sides:
            wer, cer, each[name] = error_rates(references, answers[name])
            speed = tokens[name] / seconds[name] if seconds[name] > 0 else None
            scores[name] = Scores(
                wer=round(wer, 6), cer=round(cer, 6), generated_tokens=tokens[name], tokens_per_second=speed
            )
        progress(0.97, f"Writing {PREDICTIONS_FILE}")

        table = [
            {
                "index": i,
                "audio": _name(row["audio"]),
                "reference": row["text"],
                **{f"{name}_answer": answers[name][i] if name in answers else None for name in ("tuned", "base")},
                **{f"wer_{name}": each[name][i] if name in each else None for name in ("tuned", "base")},
            }
            for i, row in enumerate(rows)
        ]
        return write_result(
            context, table, scores, available=available, began=began, device=server.device, label="speech-to-text"
        )
