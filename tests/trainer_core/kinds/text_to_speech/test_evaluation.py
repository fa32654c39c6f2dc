"""Evaluating a text-to-speech run (``TEXT_TO_SPEECH.evaluation()``) through the evaluation's own
doors: ``sources.plan_data`` + ``worker.evaluate`` (the task worker's code, in process). The run: a
LoRA adapter of the tiny CSM (``tests/support/tts_data.lora_tts_run``) with a 50 % held-out split of
its two clips. Without a speech-to-text model the result has the reconstruction loss of tuned and
base (they differ: the adapter is random) and says "reconstruction loss only"; with the tiny
Whisper named, each side's speech is transcribed back and WER / CER are jiwer's over the
transcripts written to ``predictions.jsonl``."""

from __future__ import annotations

import json

import jiwer
import pytest

from tests.support.speech_data import speech_request
from tests.support.tts_data import lora_tts_run, tts_file
from trainer_core.cli.chat import choice_for
from trainer_core.evaluation.report import PREDICTIONS_FILE, SCORES_FILE
from trainer_core.evaluation.sources import plan_data
from trainer_core.evaluation.worker import evaluate
from trainer_core.kinds.text_to_speech.evaluation import LOSS_ONLY, TtsEvaluation
from trainer_core.model_kind import kind_named
from trainer_core.paths import PathNotAllowed
from trainer_core.settings import get_settings


@pytest.fixture(scope="module")
def run(tiny_csm_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tts-eval")
    data = tts_file(folder / "data", speakers=(2, 1))
    out = lora_tts_run(tiny_csm_dir, folder / "run")
    request = speech_request(tiny_csm_dir, data, val_size=0.5, max_seq_length=512)
    (out / "request.json").write_text(json.dumps(request.public_dict()), encoding="utf-8")  # as the runner does
    return out


@pytest.fixture
def whisper_allowed(monkeypatch, tiny_whisper_dir):
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", str(tiny_whisper_dir.parent))
    get_settings.cache_clear()
    yield tiny_whisper_dir
    get_settings.cache_clear()


def _evaluate(run, tmp_path, **fields):
    choice = choice_for(str(run))
    plan = plan_data(choice, [], None)
    assert plan["kind"] == "text_to_speech" and isinstance(kind_named(plan["kind"]).evaluation(), TtsEvaluation)
    context = {"choice": choice.model_dump(), "models_dir": str(tmp_path), "output_dir": str(tmp_path), "data": plan}
    result = evaluate({"model": choice.id, **fields}, context)
    rows = [json.loads(line) for line in (tmp_path / PREDICTIONS_FILE).read_text().splitlines()]
    assert json.loads((tmp_path / SCORES_FILE).read_text())["tuned"]["loss"] == result.tuned.loss
    return result, rows


def test_without_a_speech_to_text_model_the_reconstruction_loss_only(run, tmp_path):
    result, rows = _evaluate(run, tmp_path)
    assert (result.rows_evaluated, result.rows_available) == (1, 1)  # 50 % of 2 clips
    assert result.notes == [LOSS_ONLY] and "reconstruction loss only" in result.notes[0]
    assert result.tuned.wer is None and result.base.wer is None and result.tuned.cer is None
    assert result.tuned.loss > 0 and result.base.loss > 0 and result.tuned.loss != result.base.loss
    assert rows[0]["loss_tuned"] == pytest.approx(result.tuned.loss) and rows[0]["speaker"] in (1, 2)
    assert rows[0]["audio"] in {"2.wav", "3.flac"} and "tuned_answer" not in rows[0]


def test_with_whisper_the_round_trip_is_scored_by_wer_and_cer(run, tmp_path, whisper_allowed):
    result, rows = _evaluate(run, tmp_path, speech_to_text_model=str(whisper_allowed))
    assert result.notes == [] and result.rows_evaluated == 1
    references = [row["reference"] for row in rows]
    for side in ("tuned", "base"):
        scores, answers = getattr(result, side), [row[f"{side}_answer"] for row in rows]
        assert all(isinstance(answer, str) for answer in answers)
        assert scores.wer is not None and 0 <= scores.wer < float("inf") and scores.loss > 0
        assert scores.wer == pytest.approx(jiwer.wer(references, answers), abs=1e-6)
        assert scores.cer == pytest.approx(jiwer.cer(references, answers), abs=1e-6)


def test_a_speech_to_text_model_outside_the_allowed_folders_is_refused(run, tmp_path, tiny_whisper_dir):
    with pytest.raises(PathNotAllowed) as refused:
        _evaluate(run, tmp_path, speech_to_text_model=str(tiny_whisper_dir))
    assert "speech_to_text_model" in str(refused.value)
