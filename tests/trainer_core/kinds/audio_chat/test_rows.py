"""Audio chat rows as users bring them, kept for an audio-in chat model: LLaMA-Factory's ``audios``
lists with ``<audio>`` markers, OpenAI ``input_audio`` content parts (base64 + format) and a Hub
``Audio`` column; and each refusal by file and row (a marker count that differs from the clip
count, a missing clip, a path outside the allowed folders, a file that is not audio)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import datasets
import pytest

from trainer_core.data.audio_rows import has_audio
from trainer_core.data.errors import DatasetError
from trainer_core.data.files import read_file
from trainer_core.kinds.audio_chat.rows import normalize_audio_chat
from trainer_core.vocabulary import FormatType

ANSWER = "A woman is coughing."


@pytest.fixture
def clips(tmp_path: Path, datasets_dir: Path) -> Path:
    """A data folder with the demo's clips in ``sounds/``."""
    folder = tmp_path / "data"
    shutil.copytree(datasets_dir / "mllm_demo_data", folder / "sounds", ignore=shutil.ignore_patterns("*.jpg"))
    return folder


def write(folder: Path, rows: list[dict], name: str = "rows.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def audio_rows(path: Path, roots=()) -> datasets.Dataset:
    return normalize_audio_chat(read_file(str(path)), FormatType.auto, path.name, path.parent, roots)[0]


def chat(user, audios: list) -> dict:
    return {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": ANSWER}], "audios": audios}


def test_llama_factorys_demo_file_keeps_its_markers_and_resolves_its_paths(datasets_dir):
    path = datasets_dir / "mllm_audio_demo.json"
    rows = audio_rows(path)
    assert rows.column_names == ["messages", "audios"]
    assert [row["audios"] for row in rows] == [
        [str((datasets_dir / "mllm_demo_data" / name).resolve())] for name in ("1.mp3", "2.wav", "3.flac")
    ]
    assert rows[2]["messages"][0]["content"] == "<audio>What does the person say?"
    assert has_audio(read_file(str(path)))


def test_openai_input_audio_parts_become_markers_where_they_stood(clips):
    data = base64.b64encode((clips / "sounds" / "2.wav").read_bytes()).decode("ascii")
    part = {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
    user = [{"type": "text", "text": "Listen: "}, part, {"type": "text", "text": " what is it?"}]
    path = write(clips, [{"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": ANSWER}]}])
    assert has_audio(read_file(str(path)))
    rows = audio_rows(path)
    assert rows[0]["messages"][0]["content"] == "Listen: \n<audio>\n what is it?"  # parts joined by lines
    assert rows[0]["audios"] == [f"data:audio/wav;base64,{data}"]


def test_a_hub_audio_column_gets_its_clips_before_the_first_user_turn(clips):
    wav = (clips / "sounds" / "2.wav").read_bytes()
    features = datasets.Features(
        {
            "messages": datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")}),
            "audio": {"bytes": datasets.Value("binary"), "path": datasets.Value("string")},  # encoding needs torchcodec
        }
    )
    turns = [{"role": "user", "content": "What can you hear?"}, {"role": "assistant", "content": ANSWER}]
    hub = datasets.Dataset.from_dict({"messages": [turns], "audio": [{"bytes": wav, "path": None}]}, features=features)
    hub = hub.cast_column("audio", datasets.Audio())  # as the Hub hands it over
    assert has_audio(hub)
    rows, _ = normalize_audio_chat(hub, FormatType.auto, "hub", None, [])
    assert rows[0]["messages"][0]["content"] == "<audio>What can you hear?"
    assert (
        rows[0]["audios"][0].startswith("data:audio/") and base64.b64decode(rows[0]["audios"][0].split(",")[1]) == wav
    )


@pytest.mark.parametrize(
    ("row", "words"),
    [
        (chat("<audio><audio>Both?", ["sounds/2.wav"]), "its turns hold 2 <audio> marker(s) but it has 1 audio clip"),
        (chat("<audio>Which?", ["sounds/missing.wav"]), "missing.wav"),
        (chat("<audio>Which?", ["../../outside.wav"]), "outside.wav"),
        (chat("<audio>Which?", ["sounds/not-audio.wav"]), "not-audio.wav"),
    ],
    ids=["marker-count", "missing", "outside-the-folders", "not-audio"],
)
def test_each_bad_row_is_refused_by_file_and_row(clips, row, words):
    (clips / "sounds" / "not-audio.wav").write_text("plain text, not a wav", encoding="utf-8")
    (clips.parent.parent / "outside.wav").write_bytes((clips / "sounds" / "2.wav").read_bytes())
    path = write(clips, [chat("<audio>Fine.", ["sounds/2.wav"]), row])
    with pytest.raises(DatasetError) as refused:
        audio_rows(path)
    assert str(refused.value).startswith("rows.json, row 2: ")
    if words != "not-audio.wav":  # the clip's own refusal words are data.audio's
        assert words in str(refused.value)


def test_an_image_in_an_audio_row_is_refused_by_row(clips):
    row = chat("<audio>Fine.", ["sounds/2.wav"]) | {"images": ["sounds/1.jpg"]}
    path = write(clips, [row])
    with pytest.raises(DatasetError, match=r"rows.json, row 1: it holds 1 image \(column 'images'\)"):
        audio_rows(path)
