"""Evaluating a speech-to-text run (``SPEECH_TO_TEXT.evaluation()``) through the evaluation's own
doors: ``sources.plan_data`` + ``worker.evaluate`` (the task worker's code, in process). The run: a
LoRA adapter of the tiny Whisper (``tests/support/speech_runs.py``) with a 50 % held-out split of
the four shared clips; WER and CER of tuned and base equal jiwer's over the transcripts written to
``predictions.jsonl``, and the report table shows them."""

from __future__ import annotations

import json

import jiwer
import pytest

from tests.support.speech_data import speech_file, speech_request
from tests.support.speech_runs import lora_speech_run
from trainer_core.cli.chat import choice_for
from trainer_core.evaluation.report import PREDICTIONS_FILE, SCORES_FILE, score_table
from trainer_core.evaluation.sources import plan_data
from trainer_core.evaluation.worker import evaluate
from trainer_core.kinds.speech_to_text.evaluation import SpeechEvaluation, error_rates
from trainer_core.model_kind import kind_named


@pytest.fixture(scope="module")
def run(tiny_whisper_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stt-eval")
    data = speech_file(folder / "data")
    out = lora_speech_run(tiny_whisper_dir, folder / "run")
    request = speech_request(tiny_whisper_dir, data, val_size=0.5, language="en", task="transcribe")
    (out / "request.json").write_text(json.dumps(request.public_dict()), encoding="utf-8")  # as the runner does
    return out


def test_a_run_is_scored_by_wer_and_cer_beside_its_base_on_its_held_out_clips(run, tmp_path):
    choice = choice_for(str(run))
    plan = plan_data(choice, [], None)
    assert plan["kind"] == "speech_to_text" and plan["task"] == "transcribe" and plan["language"] == "en"
    assert isinstance(kind_named(plan["kind"]).evaluation(), SpeechEvaluation)
    context = {"choice": choice.model_dump(), "models_dir": str(tmp_path), "output_dir": str(tmp_path), "data": plan}
    result = evaluate({"model": choice.id}, context)
    assert (result.rows_evaluated, result.rows_available) == (2, 2)  # 50 % of 4 clips
    rows = [json.loads(line) for line in (tmp_path / PREDICTIONS_FILE).read_text().splitlines()]
    references = [row["reference"] for row in rows]
    for side in ("tuned", "base"):
        answers = [row[f"{side}_answer"] for row in rows]
        scores = getattr(result, side)
        assert scores.wer == pytest.approx(jiwer.wer(references, answers), abs=1e-6)
        assert scores.cer == pytest.approx(jiwer.cer(references, answers), abs=1e-6)
        assert scores.generated_tokens > 0 and scores.loss is None
        assert [row[f"wer_{side}"] for row in rows] == pytest.approx(
            [jiwer.wer(r, a) for r, a in zip(references, answers)]
        )
    assert {row["audio"] for row in rows} <= {"1.mp3", "2.wav", "3.flac", "4.mp3"}
    labels = [line[0] for line in score_table(result.tuned, result.base)]
    assert "WER" in labels and "CER" in labels and "perplexity" not in labels
    assert json.loads((tmp_path / SCORES_FILE).read_text())["tuned"]["wer"] == result.tuned.wer


def test_error_rates_count_words_and_characters():
    wer, cer, each = error_rates(["a cat sat", "hello"], ["a cat", "hullo"])
    assert wer == pytest.approx(2 / 4) and each == [pytest.approx(1 / 3), 1.0]
    assert cer == pytest.approx((4 + 1) / (9 + 5))  # " sat" deleted, one letter changed
