"""The text-to-speech kind in the registry (CSM found from its config, a LoRA run's folder from its
adapter's base, noted in the picker), its rows (speaker column, default speaker) and their refusals
by row, and its pre-flight line."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.speech_data import speech_request
from tests.support.tts_data import tts_file
from trainer_core import model_kind
from trainer_core.data.errors import DatasetError
from trainer_core.kinds.text_to_speech.check import tts_report
from trainer_core.kinds.text_to_speech.data import prepare_tts_data
from trainer_core.kinds.text_to_speech.family import TTS_MODELS
from trainer_core.kinds.text_to_speech.kind import TEXT_TO_SPEECH
from trainer_core.kinds.text_to_speech.serve import load_processor


def test_csm_is_found_from_its_config_and_a_lora_run_from_its_base(tiny_csm_dir, tmp_path):
    assert model_kind.kind_for_folder(tiny_csm_dir) is TEXT_TO_SPEECH
    assert model_kind.picker_note({"model_type": "csm"}) == " · text-to-speech (CSM)"
    assert TEXT_TO_SPEECH.model_class().__name__ == "AutoModelForTextToWaveform"
    assert TEXT_TO_SPEECH in model_kind.readers_of("audio") and TTS_MODELS[0] in model_kind.way_out("audio")
    run = tmp_path / "run"
    run.mkdir()
    (run / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tiny_csm_dir)}))
    assert model_kind.kind_for_folder(run) is TEXT_TO_SPEECH and TEXT_TO_SPEECH.serves == "speech"
    assert "speaker_column" in TEXT_TO_SPEECH.form_fields and "speaker_column" in model_kind.own_fields()


def test_rows_speakers_and_the_check_line(tiny_csm_dir, tmp_path):
    data = tts_file(tmp_path / "data", speakers=(3, 1))
    processor = load_processor(tiny_csm_dir)
    prepared = prepare_tts_data(speech_request(tiny_csm_dir, data, max_seq_length=512), processor)
    assert list(prepared.train["speaker"]) == [3, 1] and prepared.stats.rows == 2
    assert prepared.stats.trained_tokens == sum(round(s * 12.5 + 0.49) + 1 for s in prepared.train["seconds"])
    plain = tmp_path / "data" / "plain.json"
    plain.write_text(json.dumps([{"audio": "2.wav", "text": "Hello."}]))
    assert list(prepare_tts_data(speech_request(tiny_csm_dir, plain), processor).train["speaker"]) == [0]
    report = tts_report(
        speech_request(tiny_csm_dir, data, max_seq_length=512), tiny_csm_dir, time.perf_counter(), TEXT_TO_SPEECH
    )
    assert report.errors == [] and report.vision.startswith("Text-to-speech (CSM): 2 clips, ")
    assert "2 speakers" in report.vision and "12.5 a second" in report.vision


@pytest.mark.parametrize(
    ("rows", "fields", "code", "words"),
    [
        ([{"audio": "gone.wav", "text": "x"}], {}, "audio_unreadable", "gone.wav"),
        ([{"audio": "2.wav", "text": " "}], {}, "text_missing", "row 1"),
        ([{"audio": "2.wav", "text": "x", "speaker": "alice"}], {}, "speaker_not_a_number", "'alice'"),
        ([{"audio": "2.wav", "text": "x"}], {"speaker_column": "voice"}, "speaker_column_missing", "voice"),
        ([{"audio": "2.wav", "text": "x"}], {"max_audio_seconds": 1}, "audio_too_long", "2.wav"),
        ([{"audio": "2.wav", "text": "x"}], {"max_seq_length": 16}, "tts_row_too_long", "max_seq_length 16"),
        ([{"audio": "/etc/passwd", "text": "x"}], {}, "audio_unreadable", "outside"),
    ],
)
def test_refusals_by_row(tiny_csm_dir, tmp_path, rows, fields, code, words):
    data = tts_file(tmp_path / "data")
    bad = data.parent / "bad.json"
    bad.write_text(json.dumps(rows))
    with pytest.raises(DatasetError) as refused:
        prepare_tts_data(speech_request(tiny_csm_dir, bad, **fields), load_processor(tiny_csm_dir))
    assert refused.value.code == code and words in str(refused.value), str(refused.value)
