"""The clips rows name (``data.audio_rows``): found in every layout people bring (an ``audios`` list,
a Hub ``Audio`` column, ``input_audio`` parts, an ``audio`` column of clip files), each one passed
through the one audio opener and refused by file and row; ``is_dataset_audio`` against the data
and the model; and audio rows refused for a text-only or image-and-text model, naming every kind of
model that reads audio (toy kinds here: ``tests.support.audio_kinds``)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import datasets
import pytest

from tests.support.audio_kinds import AUDIO_CHAT, SPEECH, audio_row, registered, write_clip
from trainer_core.data.audio_rows import (
    audio_switch,
    checked_clips,
    detected_words,
    has_audio,
    row_references,
    source_switch,
)
from trainer_core.data.errors import DatasetError
from trainer_core.data.files import read_file
from trainer_core.data.formats import normalize_with_notes
from trainer_core.data.media import media_columns, refuse_media
from trainer_core.kinds.vision.kind import VISION
from trainer_core.model_kind import way_out
from trainer_core.vocabulary import FormatType

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode("ascii")
TEXT = {"type": "text", "text": "A tone."}
BOTH = "choose a speech-to-text model (e.g. toy/whisper-tiny), or an audio chat model (e.g. toy/qwen2-audio)"


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """A data folder: ok.wav (1 s), long.wav (3 s), stereo.flac (0.5 s at 44.1 kHz), garbage.wav."""
    folder = tmp_path_factory.mktemp("clips")
    write_clip(folder / "ok.wav", 1.0)
    write_clip(folder / "long.wav", 3.0)
    write_clip(folder / "stereo.flac", 0.5, rate=44_100, channels=2)
    (folder / "garbage.wav").write_bytes(b"RIFF-this is no wave at all" * 10)
    return folder


def rows(*clips: str) -> datasets.Dataset:
    return datasets.Dataset.from_list([audio_row(clip) for clip in clips])


def test_every_layout_of_clips_is_found(clips: Path) -> None:
    listed = rows("ok.wav", "stereo.flac")
    assert media_columns(listed) == {"audios": "audio"} and has_audio(listed)
    wav = base64.b64encode((clips / "ok.wav").read_bytes()).decode("ascii")
    part = {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}}
    parts = datasets.Dataset.from_list(
        [{"messages": [{"role": "user", "content": [part, TEXT]}, {"role": "assistant", "content": [TEXT]}]}]
    )
    ((found,),) = row_references(parts)  # one row, one part (Arrow adds the other parts' keys as None)
    assert has_audio(parts) and found["type"] == "input_audio" and found["input_audio"] == part["input_audio"]
    stats = checked_clips(parts, "parts.json", clips, [], 30)
    assert stats.references[0][0].startswith("data:audio/wav;base64,") and round(stats.clips[0].seconds, 2) == 1.0
    named = {"type": "audio", "audio": {"path": "ok.wav"}}  # a part naming a file (audio chat reads it too)
    by_path = datasets.Dataset.from_list([{"messages": [{"role": "user", "content": [named, TEXT]}]}])
    assert has_audio(by_path) and checked_clips(by_path, "p.json", clips, [], 30).references == [
        [str(clips / "ok.wav")]
    ]
    column = datasets.Dataset.from_list([{"audio": "ok.wav", "text": "a tone"}, {"audio": "long.wav", "text": "x"}])
    assert media_columns(column) == {"audio": "audio"} and has_audio(column)
    words = datasets.Dataset.from_list([{"audio": "loud", "text": "a tone"}])  # a column named audio, of text
    assert media_columns(words) == {} and not has_audio(words)
    stored = {"bytes": (clips / "stereo.flac").read_bytes(), "path": "stereo.flac"}  # as a Hub parquet holds it
    hub = datasets.Dataset.from_dict({"speech": [stored], "text": ["a tone"]}).cast_column("speech", datasets.Audio())
    assert media_columns(hub) == {"speech": "audio"}
    (clip,) = checked_clips(hub, "hub:user/speech", None, [], 30).clips  # the bytes: a data: URL, no path
    assert (clip.row, clip.name, clip.sampling_rate, clip.channels) == (1, "(data: URL)", 44_100, 2)
    assert clip.seconds == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("clip", "message"),
    [
        ("missing.wav", r"^data.json, row 2: audio clip missing.wav was not found"),
        ("garbage.wav", r"^data.json, row 2: audio clip garbage.wav cannot be read as audio"),
        (f"data:image/png;base64,{PNG}", r"^data.json, row 2: audio clip \(data: URL\) cannot be read as audio"),
        ("/etc/hostname", r"^data.json, row 2: .*outside the allowed folders"),
        ("../outside.wav", r"^data.json, row 2: .*outside the allowed folders"),
    ],
)
def test_a_clip_that_cannot_be_used_is_refused_by_file_and_row(clips: Path, clip: str, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        checked_clips(rows("ok.wav", clip), "data.json", clips, [clips], 30, first_row=1)


def test_clips_over_the_limit_are_listed_by_row_naming_max_audio_seconds(clips: Path) -> None:
    with pytest.raises(DatasetError) as refused:
        checked_clips(rows("ok.wav", "long.wav", "ok.wav", "long.wav"), "data.json", clips, [clips], 2.0, first_row=11)
    assert str(refused.value).startswith(
        "data.json: 2 clip(s) longer than max_audio_seconds (2 s): row 12 (long.wav, 3.0 s), row 14 (long.wav, 3.0 s)."
    )
    assert refused.value.fields == ("max_audio_seconds",)
    stats = checked_clips(rows("ok.wav", "long.wav"), "data.json", clips, [clips], 3.5)
    assert [c.name for c in stats.clips] == ["ok.wav", "long.wav"] and stats.total_seconds == pytest.approx(4.0)
    assert stats.longest.row == 2 and stats.over(2.0) == [stats.clips[1]]


def test_is_dataset_audio_is_checked_against_the_data_and_the_model() -> None:
    assert audio_switch(None, True, True, "m") and not audio_switch(None, True, False, "m")
    assert not audio_switch(None, False, True, "m")
    with registered(SPEECH, AUDIO_CHAT):
        with pytest.raises(
            DatasetError, match=f"is_dataset_audio: it is on, but m reads no audio .*: {re.escape(BOTH)}"
        ) as on:
            audio_switch(True, True, False, "m")
    assert on.value.fields == ("is_dataset_audio", "model_name")
    with pytest.raises(DatasetError, match="is_dataset_audio: it is on, but no row of the data holds an audio clip"):
        audio_switch(True, False, True, "m")
    with pytest.raises(DatasetError, match="is_dataset_audio: it is off, but the data holds audio clips"):
        audio_switch(False, True, True, "m")
    assert not audio_switch(False, True, False, "m")  # a text model's rows with clips: refused as text, by row
    assert not source_switch(True, False, True, "m")  # one source without clips, another may hold them
    assert detected_words(None, True) == "is_dataset_audio: found from the data (yes)"
    assert detected_words(False, False) == "is_dataset_audio: off (set)"


def test_audio_rows_for_a_text_or_vision_model_name_every_audio_kind(datasets_dir: Path, clips: Path) -> None:
    demo = read_file(str(datasets_dir / "mllm_audio_demo.json"))
    with registered(SPEECH, AUDIO_CHAT):
        way = way_out("audio")  # the toys first, then the built-in audio kinds
        assert way.startswith(BOTH)
        with pytest.raises(DatasetError) as text_only:
            refuse_media(demo, "mllm_audio_demo.json")
        with pytest.raises(DatasetError) as vision:
            VISION.media_rows(demo, FormatType.auto, "mllm_audio_demo.json", datasets_dir)
        wav = base64.b64encode((clips / "ok.wav").read_bytes()).decode("ascii")
        part = {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}}
        turns = [{"role": "user", "content": [part]}, {"role": "assistant", "content": [TEXT]}]
        with pytest.raises(DatasetError) as parts:
            normalize_with_notes(datasets.Dataset.from_list([{"messages": turns}] * 2), FormatType.auto, "p.json", 5)
    assert str(text_only.value) == (
        "mllm_audio_demo.json, row 1: it holds 1 audio clip (column 'audios'), and this model reads text only: the "
        "audio clips would never be seen and their <audio> markers would be trained as text. Remove the column "
        f"'audios' and the <audio> markers to train on the text alone, or {way}"
    )
    assert str(vision.value).startswith(
        "mllm_audio_demo.json, row 1: it holds 1 audio clip (column 'audios'), and this model reads images and text"
    )
    assert str(parts.value).startswith("p.json, row 5: turn 1 (user), content part 1 is an audio part") and way in str(
        parts.value
    )
    with pytest.raises(DatasetError) as built_in:  # the toys gone: the built-in audio kinds are named
        refuse_media(demo, "mllm_audio_demo.json")
    assert str(built_in.value).endswith(
        "or choose a speech-to-text model for (audio, transcript) rows (e.g. openai/whisper-tiny, openai/whisper-small), "
        "or a text-to-speech model for (text, audio) rows (e.g. sesame/csm-1b), "
        "or an Orpheus-style text-to-speech model with its SNAC codec (e.g. canopylabs/orpheus-3b-0.1-pretrained), "
        "or an audio-in chat model (e.g. Qwen/Qwen2-Audio-7B-Instruct)"
    )


def test_the_shared_demo_is_read_whole(datasets_dir: Path) -> None:
    demo = read_file(str(datasets_dir / "mllm_audio_demo.json"))
    stats = checked_clips(demo, "mllm_audio_demo.json", datasets_dir, [], 30)
    assert [(c.row, c.name, c.sampling_rate, c.channels) for c in stats.clips] == [
        (1, "1.mp3", 48_000, 2),
        (2, "2.wav", 16_000, 1),
        (3, "3.flac", 16_000, 1),
    ]
    assert [round(c.seconds, 2) for c in stats.clips] == [4.03, 2.9, 5.86]
    assert json.loads((datasets_dir / "mllm_audio_demo.json").read_text())[0]["audios"] == ["mllm_demo_data/1.mp3"]
