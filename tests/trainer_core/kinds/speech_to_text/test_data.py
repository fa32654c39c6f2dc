"""Speech-to-text rows as users bring them: clips by path relative to the data file (mp3 / wav /
flac), the transcript under its usual names or mapped, ``data:`` URLs, a Hub ``Audio`` column; the
``val_size`` split and the counts; each refusal by file and row (a missing file, a path outside the
allowed folders, a file that is no audio, a clip over ``max_audio_seconds``, a missing transcript,
columns that make no rows)."""

from __future__ import annotations

import base64
import json

import datasets
import pytest

from tests.support.speech_data import ROWS, speech_file, speech_request
from trainer_core.data.errors import DatasetError
from trainer_core.kinds.speech_to_text.data import prepare_speech_data, speech_rows
from trainer_core.kinds.speech_to_text.loading import load_processor


@pytest.fixture(scope="module")
def processor(tiny_whisper_dir):
    return load_processor(tiny_whisper_dir)


def test_relative_clips_and_the_split_are_read_with_their_counts(processor, tiny_whisper_dir, tmp_path):
    data = speech_file(tmp_path / "data", column="sentence")
    request = speech_request(tiny_whisper_dir, data, val_size=0.25, language="en", task="transcribe")
    prepared = prepare_speech_data(request, processor, max_target_positions=128)
    assert (len(prepared.train), len(prepared.eval)) == (3, 1)
    assert prepared.train.column_names == ["audio", "text", "seconds"]
    every = {row["text"]: row for row in [*prepared.train, *prepared.eval]}
    assert set(every) == {text for _, text in ROWS}
    assert every[ROWS[1][1]]["audio"] == str((tmp_path / "data" / "2.wav").resolve())
    stats = prepared.stats
    assert stats.rows == 3 and 2.5 < stats.longest_seconds < 6.0
    assert stats.seconds == pytest.approx(sum(prepared.train["seconds"]), abs=1e-3)
    tokens = [len(processor.tokenizer(t, add_special_tokens=False).input_ids) + 1 for t in prepared.train["text"]]
    assert stats.trained_tokens == sum(tokens)  # transcripts + eos
    assert stats.total_tokens == sum(tokens) + 4 * 3  # + the 4-token prompt a row
    assert stats.truncated_rows == 0 and stats.max_seq_length == 64


def test_a_mapped_column_a_data_url_and_a_hub_audio_column(processor, tiny_whisper_dir, tmp_path):
    wav = (speech_file(tmp_path).parent / "2.wav").read_bytes()
    url = "data:audio/wav;base64," + base64.b64encode(wav).decode()
    data = tmp_path / "mapped.json"
    data.write_text(json.dumps([{"audio": url, "caption": "A woman is coughing."}] * 2))
    request = speech_request(tiny_whisper_dir, data, custom_format_mapping={"text": "caption"})
    prepared = prepare_speech_data(request, processor, max_target_positions=128)
    assert prepared.train["text"] == ["A woman is coughing."] * 2
    assert prepared.train["audio"][0].startswith("data:")
    hub = datasets.Dataset.from_dict({"clip": [{"bytes": wav, "path": None}], "transcript": ["A cough."]})
    hub = hub.cast_column("clip", datasets.Audio(decode=False))
    rows = speech_rows(hub, "hub [train]", None, [], 1, 30.0)
    assert rows["text"] == ["A cough."] and rows["seconds"][0] > 2.0


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ({"audio": "nothing.wav", "text": "x"}, "nothing.wav"),
        ({"audio": "../../../etc/passwd", "text": "x"}, "passwd"),
        ({"audio": "notes.wav", "text": "x"}, "notes.wav"),  # text in a .wav file
        ({"audio": "data:audio/wav;base64," + base64.b64encode(b"not audio at all").decode(), "text": "x"}, "row 2"),
        ({"audio": "2.wav", "text": "  "}, "transcript"),
    ],
)
def test_bad_rows_are_refused_naming_file_and_row(processor, tiny_whisper_dir, tmp_path, row, said):
    speech_file(tmp_path)
    (tmp_path / "notes.wav").write_text("these are notes, not a recording")
    data = tmp_path / "bad.json"
    data.write_text(json.dumps([{"audio": "2.wav", "text": "A woman is coughing."}, row]))
    with pytest.raises(DatasetError) as refused:
        prepare_speech_data(speech_request(tiny_whisper_dir, data), processor, max_target_positions=128)
    message = str(refused.value)
    assert "bad.json" in message and "row 2" in message and said in message


def test_a_clip_over_the_limit_and_columns_that_make_no_rows_are_refused(processor, tiny_whisper_dir, tmp_path):
    data = speech_file(tmp_path)
    with pytest.raises(DatasetError) as refused:
        prepare_speech_data(speech_request(tiny_whisper_dir, data, max_audio_seconds=4.0), processor, 128)
    assert "row 1" in str(refused.value) and "longest clip of 4 s (max_audio_seconds)" in str(refused.value)
    assert refused.value.fields[0] == "max_audio_seconds"
    processor.feature_extractor.chunk_length = 5  # a model that hears 5 s at once: 3.flac (5.9 s) is refused
    try:
        with pytest.raises(DatasetError) as refused:
            prepare_speech_data(speech_request(tiny_whisper_dir, data), processor, 128)
    finally:
        processor.feature_extractor.chunk_length = 8
    assert "row 3" in str(refused.value) and "hears 5 s" in str(refused.value)
    other = tmp_path / "chat.json"
    other.write_text(json.dumps([{"instruction": "hi", "output": "hello"}]))
    with pytest.raises(DatasetError) as refused:
        prepare_speech_data(speech_request(tiny_whisper_dir, other), processor, 128)
    assert "custom_format_mapping" in str(refused.value) and refused.value.code == "no_speech_columns"
