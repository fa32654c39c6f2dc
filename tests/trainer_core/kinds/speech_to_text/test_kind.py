"""The speech-to-text kind in the registry (Whisper found from its config, noted in the picker,
named where audio rows are refused for a text model) and its pre-flight check: the line (clips,
seconds, encoder frames, the decoder prompt, tokens), steps, and the errors Start refuses on."""

from __future__ import annotations

import time

from tests.support.speech_data import speech_file, speech_request
from trainer_core import model_kind
from trainer_core.kinds.speech_to_text.check import speech_report
from trainer_core.kinds.speech_to_text.kind import SPEECH_TO_TEXT


def test_whisper_is_found_from_its_config_and_noted_in_the_picker(tiny_whisper_dir):
    assert model_kind.kind_for_folder(tiny_whisper_dir) is SPEECH_TO_TEXT
    assert model_kind.kind_of({"model_type": "whisper"}) is SPEECH_TO_TEXT
    assert model_kind.kind_of({"model_type": "llama"}).name == "causal"
    assert model_kind.picker_note({"model_type": "whisper"}) == " · speech-to-text (Whisper)"
    assert model_kind.reader_of("audio") is SPEECH_TO_TEXT
    assert "openai/whisper-tiny" in SPEECH_TO_TEXT.suggestion
    assert SPEECH_TO_TEXT.model_class().__name__ == "AutoModelForSpeechSeq2Seq"


def test_the_check_line_and_its_refusals(tiny_whisper_dir, tmp_path):
    data = speech_file(tmp_path / "data")
    request = speech_request(tiny_whisper_dir, data, val_size=0.25, num_epochs=2, max_steps=0, language="en")
    report = speech_report(request, tiny_whisper_dir, time.perf_counter(), SPEECH_TO_TEXT)
    assert report.errors == []
    assert (report.rows_kept, report.eval_rows, report.steps_per_epoch, report.total_steps) == (3, 1, 2, 4)
    line = report.vision
    assert line.startswith("Speech-to-text (Whisper): 3 clips (1 held out), ")
    assert "decoder prompt <|startoftranscript|><|en|><|transcribe|><|notimestamps|>" in line
    assert f"{report.tokens_trained} tokens" in line and "0 cut at 64" in line
    # every clip is one 8 s window of the tiny Whisper: 400 encoder frames (its max_source_positions), counted
    assert "1200 encoder frames (400 a clip: each clip is heard as one 8 s window)" in line
    assert report.tokens_total == 3 * 400 + 3 * 4 + report.tokens_trained  # frames + 4-token prompts + transcripts
    dpo = speech_report(
        speech_request(tiny_whisper_dir, data, training_method="dpo"), tiny_whisper_dir, 0.0, SPEECH_TO_TEXT
    )
    assert [(e.code, e.fields) for e in dpo.errors] == [("speech_method", ["training_method", "model_name"])]
    missing = tmp_path / "data" / "missing.json"
    missing.write_text('[{"audio": "gone.wav", "text": "x"}]')
    refused = speech_report(speech_request(tiny_whisper_dir, missing), tiny_whisper_dir, 0.0, SPEECH_TO_TEXT)
    assert refused.errors[0].code == "data_error" and "missing.json: row 1" in refused.errors[0].message
    assert "gone.wav" in refused.errors[0].message
