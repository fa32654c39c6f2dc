"""The dataset preview's audio (``data.audio_preview`` through ``inspect.inspect_dataset``): for a
model that reads audio, a player of each clip of the first rows with its duration, and a line on
all the clips and ``is_dataset_audio``; the switch and the length limit refused there as at Check."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
import soundfile

from tests.support.audio_kinds import AUDIO_CHAT, registered
from tests.support.speech_data import speech_file, speech_request
from tests.support.tts_data import tts_file
from trainer_core.data.audio_preview import PREVIEW_RATE, duration_text
from trainer_core.data.errors import DatasetError
from trainer_core.data.inspect import inspect_dataset
from trainer_core.kinds.orpheus.kind import ORPHEUS
from trainer_core.kinds.speech_to_text.kind import SPEECH_TO_TEXT
from trainer_core.kinds.text_to_speech.kind import TEXT_TO_SPEECH

PLAYER = re.compile(
    r'<audio controls preload="none" src="data:audio/mpeg;base64,([A-Za-z0-9+/=]+)"></audio> (\S+) \((.+?)\)'
)


def test_the_demo_gets_a_player_and_a_duration_per_clip(datasets_dir: Path) -> None:
    with registered(AUDIO_CHAT):
        found = inspect_dataset(str(datasets_dir / "mllm_audio_demo.json"), kind=AUDIO_CHAT)
    assert list(found.sample.columns) == ["row", "conversation", "audio"] and found.rows_total == 3
    cells = [PLAYER.fullmatch(cell) for cell in found.sample["audio"]]
    names = [m.group(2).replace("\\", "") for m in cells]  # Markdown-escaped as the table's text is ("1\\.mp3")
    assert names == ["1.mp3", "2.wav", "3.flac"] and [m.group(3) for m in cells] == ["4.0 s", "2.9 s", "5.9 s"]
    for match, seconds in zip(cells, (4.032, 2.901, 5.855)):
        played = soundfile.info(io.BytesIO(base64.b64decode(match.group(1))))
        assert played.samplerate == PREVIEW_RATE and played.channels == 1
        assert played.duration == pytest.approx(seconds, abs=0.1)  # MP3 frames pad the end a little
        assert len(match.group(1)) < 10_000 * seconds  # about 6 KB of MP3 a second, 8 KB in base64
    assert found.notes[-1] == (
        "Audio: 3 clips in the first 3 rows, 12.8 s in all, longest 5.9 s (row 3, 3.flac); "
        "is_dataset_audio: found from the data (yes)"
    )
    assert "&lt;audio&gt;What's that sound?" not in found.sample["conversation"][0]  # markers escaped, shown as text
    assert found.sample["conversation"][0].startswith("**user:** \\<audio\\>What's that sound?")


def test_the_preview_refuses_as_the_check_does(datasets_dir: Path) -> None:
    demo = str(datasets_dir / "mllm_audio_demo.json")
    with registered(AUDIO_CHAT):
        with pytest.raises(DatasetError, match=r"row 3 \(3.flac, 5.9 s\)") as long:
            inspect_dataset(demo, kind=AUDIO_CHAT, max_audio_seconds=5.0)
        with pytest.raises(DatasetError, match="is_dataset_audio: it is off, but the data holds audio clips"):
            inspect_dataset(demo, kind=AUDIO_CHAT, is_dataset_audio=False)
    assert long.value.fields == ("max_audio_seconds",)
    assert (duration_text(4.04), duration_text(65.25)) == ("4.0 s", "1:05.2")


def _players(cells) -> list[tuple[str, str]]:
    """(clip name, duration) of each preview cell's one player."""
    return [(m.group(2).replace("\\", ""), m.group(3)) for m in (PLAYER.fullmatch(cell) for cell in cells)]


def test_speech_to_text_rows_are_read_as_training_reads_them(tmp_path: Path) -> None:
    data = speech_file(tmp_path / "clips", column="caption")
    request = speech_request(tmp_path / "whisper", data, custom_format_mapping={"text": "caption"})
    found = inspect_dataset(str(data), kind=SPEECH_TO_TEXT, request=request, max_audio_seconds=30.0)
    assert found.layout == "speech-to-text rows: the clip in audio, its transcript in text" and found.rows_total == 4
    assert list(found.sample.columns) == ["row", "audio", "text"]
    assert _players(found.sample["audio"]) == [
        ("1.mp3", "4.0 s"),
        ("2.wav", "2.9 s"),
        ("3.flac", "5.9 s"),
        ("4.mp3", "5.0 s"),
    ]
    assert found.sample["text"][1] == "A woman is coughing."
    assert found.notes[-1].startswith("Audio: 4 clips in the first 4 rows, 17.8 s in all")
    with pytest.raises(DatasetError, match=r"speech\.json: row 3: audio clip 3\.flac is 5\.9 s long"):
        inspect_dataset(str(data), kind=SPEECH_TO_TEXT, request=request.model_copy(update={"max_audio_seconds": 5.0}))


def test_text_to_speech_rows_show_the_speaker_column_the_form_names(tmp_path: Path) -> None:
    data = tts_file(tmp_path / "clips")
    rows = json.loads(data.read_text())
    data.write_text(json.dumps([{**row, "voice": row.pop("speaker")} for row in rows]))
    request = speech_request(tmp_path / "csm", data, speaker_column="voice")
    found = inspect_dataset(str(data), kind=TEXT_TO_SPEECH, request=request)
    assert found.layout == "text-to-speech rows: the words in text, the clip in audio, the speaker in voice"
    assert list(found.sample.columns) == ["row", "text", "speaker", "audio"]
    assert list(found.sample["speaker"]) == ["0", "1"]
    assert _players(found.sample["audio"]) == [("2.wav", "2.9 s"), ("3.flac", "5.9 s")]
    with pytest.raises(DatasetError, match="speaker_column 'talker' is not a column here") as missing:
        inspect_dataset(str(data), kind=TEXT_TO_SPEECH, request=request.model_copy(update={"speaker_column": "talker"}))
    assert "speaker_column" in missing.value.fields


def test_orpheus_rows_are_previewed_with_their_speakers_names(tmp_path: Path) -> None:
    data = tts_file(tmp_path / "clips")
    rows = json.loads(data.read_text())
    for row, name in zip(rows, ("tara", "leo")):
        row["voice"] = name
        del row["speaker"]
    data.write_text(json.dumps(rows))
    request = speech_request(tmp_path / "orpheus", data, speaker_column="voice")
    found = inspect_dataset(str(data), kind=ORPHEUS, request=request)
    assert found.layout == "text-to-speech rows: the words in text, the clip in audio, the speaker in voice"
    assert list(found.sample["speaker"]) == ["tara", "leo"]
    assert _players(found.sample["audio"]) == [("2.wav", "2.9 s"), ("3.flac", "5.9 s")]
    plain = inspect_dataset(str(data), kind=ORPHEUS, request=request.model_copy(update={"speaker_column": None}))
    assert plain.layout.endswith("no speaker name")
