"""Evaluating a text-to-speech model after training (``TEXT_TO_SPEECH.evaluation()``: the Evaluate
tab and the CLI's ``evaluate``, in the evaluation worker): the held-out clips (``data.held_out_rows``:
the run's own ``val_size`` split or evaluation data, or the files given, with the run's
``custom_format_mapping`` and ``speaker_column``), scored by reconstruction loss
(``scoring.reconstruction_loss``: how well the model predicts each clip's codec frames after its
text) for the chosen model and its base (the adapter switched off, or a full fine-tune's base loaded
beside it). Where the request names a speech-to-text model (``speech_to_text_model``: a local
folder, e.g. Whisper), each model also says every held-out text (``serve.speak``) and the speech is
transcribed back (transformers' automatic-speech-recognition pipeline) and scored by word and
character error rate against the text (jiwer); else the result says "reconstruction loss only".

``predictions.jsonl`` holds one object per clip: ``index``, ``audio`` (the file's name),
``reference`` (the text), ``speaker``, ``loss_tuned`` / ``loss_base`` and, with a speech-to-text
model, ``tuned_answer`` / ``base_answer`` (the transcripts of their speech).
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
LOSS_ONLY = "reconstruction loss only: no speech-to-text model named (speech_to_text_model) to transcribe the speech"
RUN_FIELDS = ("custom_format_mapping", "speaker_column", "max_audio_seconds", "max_seq_length")


def read_rows(plan: dict[str, Any], held_out_rows: Callable[[Any, list[Path]], Any]) -> Any:
    """The planned held-out clips (columns ``audio``, ``text``, ``speaker``, ``seconds``) as
    ``held_out_rows(request, roots)`` reads a run's; raises DatasetError naming the file and row."""
    from trainer_core.settings import get_settings

    if "files" in plan:
        request = TrainingStartRequest(local_datasets=plan["files"], **plan.get("run_fields", {}))
    else:
        request = TrainingStartRequest.model_validate(plan["run_request"])
    rows = held_out_rows(request, list(get_settings().allowed_roots))
    if len(rows) == 0:
        raise DatasetError(f"{plan['source']} has no clips to evaluate", fields=("datasets",))
    return rows


def transcriber(folder: str) -> Callable[[Any, int], str]:
    """A function (samples, rate) -> text by the speech-to-text model in ``folder`` (transformers'
    automatic-speech-recognition pipeline, greedy); the speech resampled to its feature extractor's
    rate (soxr). Raises ModelLoadError."""
    import soxr
    from transformers import pipeline

    from trainer_core.models.loading import ModelLoadError

    try:
        asr = pipeline("automatic-speech-recognition", model=folder, device="cpu")
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"speech_to_text_model: could not load {folder}: {exc}") from exc
    rate = asr.feature_extractor.sampling_rate

    def transcribe(samples: Any, sampling_rate: int) -> str:
        heard = soxr.resample(samples, sampling_rate, rate) if sampling_rate != rate else samples
        return str(asr({"raw": heard, "sampling_rate": rate})["text"]).strip()

    return transcribe


class TtsEvaluation:
    """The text-to-speech kind's evaluation (``ModelKind.evaluation``'s object). A kind of
    text-to-speech model evaluated the same way (Orpheus) overrides the hooks: ``held_out_rows``,
    ``load``, ``base_side``, ``loss``, ``say`` and ``LOSS_ONLY``."""

    LOSS_ONLY = LOSS_ONLY

    @staticmethod
    def held_out_rows(request: TrainingStartRequest, roots: list[Path]) -> Any:
        """A run's held-out clips (``data.held_out_rows``)."""
        from trainer_core.kinds.text_to_speech.data import held_out_rows

        return held_out_rows(request, roots)

    @staticmethod
    def load(choice: Any, models_dir: Path) -> Any:
        """The loaded ``choice`` (``serve.TtsServer``); raises ModelLoadError."""
        from trainer_core.kinds.text_to_speech.serve import TtsServer

        return TtsServer(choice, models_dir)

    def base_side(self, server: Any, choice: Any, models_dir: Path) -> tuple[Any, bool]:
        """(the server that says the base's speech, whether its adapter is on): the same weights with
        the adapter switched off, or a full fine-tune's base loaded beside it."""
        return (server, False) if choice.adapter else (self.load(_base_choice(choice), models_dir), True)

    @staticmethod
    def loss(server: Any, row: dict, use_adapter: bool) -> float:
        """The model's reconstruction loss on ``row`` (``scoring.reconstruction_loss``)."""
        from trainer_core.kinds.text_to_speech.scoring import reconstruction_loss

        return reconstruction_loss(server.model, server.processor, [row], use_adapter)

    @staticmethod
    def say(server: Any, row: dict, use_adapter: bool) -> tuple[Any, int]:
        """(float32 samples, their rate in Hz) of the model saying ``row``'s text in its voice."""
        from trainer_core.kinds.text_to_speech.serve import speak

        samples, _ = speak(server.model, server.processor, row["text"], row["speaker"], use_adapter)
        return samples, server.processor.feature_extractor.sampling_rate

    def plan(self, plan: dict[str, Any], run_request: Optional[TrainingStartRequest]) -> dict[str, Any]:
        """``plan`` with the run's row settings (for files given), its clips read once now (a bad
        file refused before any model loads; Hub data is left to the worker). Raises DatasetError."""
        plan = dict(plan)
        if "files" in plan:
            plan["run_fields"] = {name: getattr(run_request, name) for name in RUN_FIELDS if run_request is not None}
        if "files" in plan or not plan["run_request"].get("hf_dataset"):
            read_rows(plan, self.held_out_rows)
        return plan

    def run(
        self,
        request: dict[str, Any],
        context: dict[str, Any],
        progress: Progress,
        should_stop: Callable[[], bool],
    ) -> Optional[EvaluationResult]:
        """The losses (and round-trip WER / CER) of the choice and its base on the planned clips;
        writes ``predictions.jsonl`` and ``scores.json`` into ``context["output_dir"]``. None when
        stopped. Raises DatasetError, ModelLoadError, PathNotAllowed (``speech_to_text_model``)."""
        from trainer_core.serving.schemas import ModelChoice

        began, req = time.monotonic(), EvaluateRequest.model_validate(request)
        choice, plan = ModelChoice(**context["choice"]), context["data"]
        progress(0.0, f"Reading {plan['source']}")
        rows = read_rows(plan, self.held_out_rows)
        available = len(rows)
        rows = [dict(r) for r in rows.select(range(min(req.max_rows or available, available)))]
        listen = transcriber(_confined(req.speech_to_text_model)) if req.speech_to_text_model else None
        progress(0.02, f"Loading {choice.id}")
        server = self.load(choice, Path(context["models_dir"]))
        sides = [("tuned", server, True)]
        if req.compare_base and choice.kind != "base":
            sides.append(("base", *self.base_side(server, choice, Path(context["models_dir"]))))
        table = [
            {"index": i, "audio": Path(r["audio"]).name, "reference": r["text"], "speaker": r["speaker"]}
            for i, r in enumerate(rows)
        ]
        scores = {}
        for n, (name, side, use_adapter) in enumerate(sides):
            if should_stop():
                return None
            progress(0.05 + 0.9 * n / len(sides), f"{name}: scoring {len(rows)} clips")
            scores[name] = self._side(side, rows, use_adapter, listen, table, name, should_stop)
            if scores[name] is None:
                return None
        progress(0.97, f"Writing {PREDICTIONS_FILE}")
        return write_result(
            context,
            table,
            scores,
            available=available,
            began=began,
            device=server.device,
            notes=[] if listen is not None else [self.LOSS_ONLY],
            label="text-to-speech",
        )

    def _side(
        self,
        server: Any,
        rows: list[dict],
        use_adapter: bool,
        listen: Optional[Callable[[Any, int], str]],
        table: list[dict],
        name: str,
        should_stop: Callable[[], bool],
    ) -> Optional[Scores]:
        """One model's scores on ``rows`` (its per-row loss and transcript written into ``table``)."""
        losses, heard = [], []
        for row, line in zip(rows, table):
            if should_stop():
                return None
            line[f"loss_{name}"] = round(self.loss(server, row, use_adapter), 6)
            losses.append(line[f"loss_{name}"])
            if listen is not None:
                line[f"{name}_answer"] = listen(*self.say(server, row, use_adapter))
                heard.append(line[f"{name}_answer"])
        loss = sum(losses) / max(len(losses), 1)
        if listen is None:
            return Scores(loss=round(loss, 6))
        import jiwer

        references = [row["text"] for row in rows]
        wer, cer = jiwer.wer(references, heard), jiwer.cer(references, heard)
        return Scores(loss=round(loss, 6), wer=round(float(wer), 6), cer=round(float(cer), 6))


def _confined(folder: str) -> str:
    """``folder`` resolved inside the allowed folders (PathNotAllowed naming ``speech_to_text_model``)."""
    from trainer_core.paths import confine
    from trainer_core.settings import get_settings

    return str(confine(folder, get_settings().allowed_roots, "speech_to_text_model"))


def _base_choice(choice: Any) -> Any:
    """The ``base`` choice of ``choice``'s base model (a full fine-tune's base, loaded beside it)."""
    return choice.model_copy(update={"id": "base", "kind": "base", "path": None, "adapter": False})
