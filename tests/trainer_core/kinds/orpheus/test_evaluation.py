"""Evaluating an Orpheus-style run (``ORPHEUS.evaluation()``) through the evaluation's own doors:
``sources.plan_data`` + ``worker.evaluate`` (the task worker's code, in process). The run: a LoRA
adapter of the tiny Orpheus model (``tests/support/tts_data.lora_orpheus_run``, its tokenizer naming
the tiny SNAC) with a 50 % held-out split of its two clips. The speech-token loss of tuned and base
differ (the adapter is random), and with the tiny Whisper named, each side's speech (SNAC decoded) is
transcribed back and WER / CER are jiwer's over the transcripts written to ``predictions.jsonl``."""

from __future__ import annotations

import json

import jiwer
import pytest

from tests.support.tts_data import lora_orpheus_run, tts_file
from trainer_core.cli.chat import choice_for
from trainer_core.evaluation.report import PREDICTIONS_FILE
from trainer_core.evaluation.sources import plan_data
from trainer_core.evaluation.worker import evaluate
from trainer_core.kinds.orpheus.evaluation import OrpheusEvaluation
from trainer_core.model_kind import kind_named
from trainer_core.settings import get_settings


def test_the_speech_token_loss_of_tuned_and_base_and_the_round_trip_wer(
    tiny_orpheus_dir, tiny_snac_dir, tiny_whisper_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", str(tiny_whisper_dir.parent))
    get_settings.cache_clear()
    data = tts_file(tmp_path / "data", speakers=("tara", "leo"))
    run = lora_orpheus_run(tiny_orpheus_dir, tiny_snac_dir, data, tmp_path / "run")
    choice = choice_for(str(run))
    plan = plan_data(choice, [], None)
    assert plan["kind"] == "orpheus" and isinstance(kind_named(plan["kind"]).evaluation(), OrpheusEvaluation)
    context = {"choice": choice.model_dump(), "models_dir": str(tmp_path), "output_dir": str(tmp_path), "data": plan}
    try:
        result = evaluate({"model": choice.id, "speech_to_text_model": str(tiny_whisper_dir)}, context)
    finally:
        get_settings.cache_clear()
    rows = [json.loads(line) for line in (tmp_path / PREDICTIONS_FILE).read_text().splitlines()]
    assert result.notes == [] and (result.rows_evaluated, result.rows_available) == (1, 1)  # 50 % of 2 clips
    assert result.tuned.loss > 0 and result.base.loss > 0 and result.tuned.loss != result.base.loss
    assert rows[0]["loss_tuned"] == pytest.approx(result.tuned.loss) and rows[0]["speaker"] in ("tara", "leo")
    references = [row["reference"] for row in rows]
    for side in ("tuned", "base"):
        scores, answers = getattr(result, side), [row[f"{side}_answer"] for row in rows]
        assert all(isinstance(answer, str) for answer in answers)
        assert scores.wer == pytest.approx(jiwer.wer(references, answers), abs=1e-6)
        assert scores.cer == pytest.approx(jiwer.cer(references, answers), abs=1e-6)
