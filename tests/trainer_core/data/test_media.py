"""Rows with images, audio or video are refused by file and row for a text-only model
(``data.media``), at the preview, the check and Start, never trained with their markers left
in as text ("Image data with a text-only model is refused at Check and Start")."""

from __future__ import annotations

import json

import datasets
import pytest

from trainer_core.admission.admit import admit
from trainer_core.data.files import DatasetError
from trainer_core.data.formats import normalize_with_notes
from trainer_core.data.inspect import inspect_dataset
from trainer_core.data.media import media_columns, refuse_media
from trainer_core.data.preference import normalize_preference
from trainer_core.preflight.check import run_preflight
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import FormatType

CHAT = [{"role": "user", "content": "<image>What is this?"}, {"role": "assistant", "content": "A ball."}]


def test_llama_factorys_image_file_is_refused_by_row_at_the_preview(datasets_dir):
    with pytest.raises(DatasetError) as refused:
        inspect_dataset(str(datasets_dir / "mllm_demo.json"))
    message = str(refused.value)
    assert message.startswith("mllm_demo.json, row 1: it holds 2 images (column 'images')"), message
    assert "reads text only" in message and "Remove the column 'images' and the <image> markers" in message


def test_the_audio_file_names_audio(datasets_dir):
    with pytest.raises(DatasetError, match=r"mllm_audio_demo.json, row 1: it holds 1 audio clip \(column 'audios'\)"):
        inspect_dataset(str(datasets_dir / "mllm_audio_demo.json"))


def test_the_first_row_with_media_is_named_and_empty_lists_are_text():
    rows = datasets.Dataset.from_list(
        [{"messages": CHAT, "images": []}, {"messages": CHAT, "images": []}, {"messages": CHAT, "images": ["a.jpg"]}]
    )
    with pytest.raises(DatasetError, match=r"^d.json, row 13: it holds 1 image \(column 'images'\)"):
        normalize_with_notes(rows, FormatType.auto, "d.json", first_row=11)
    text, _ = normalize_with_notes(rows.select(range(2)), FormatType.auto, "d.json")
    assert text[0]["messages"][0]["content"] == "<image>What is this?"


def test_a_hugging_face_image_column_is_found_by_its_feature(datasets_dir):
    picture = str(datasets_dir / "mllm_demo_data" / "1.jpg")
    rows = datasets.Dataset.from_dict(
        {"messages": [CHAT], "photo": [picture]},
        features=datasets.Features(
            {
                "messages": datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")}),
                "photo": datasets.Image(),
            }
        ),
    )
    assert media_columns(rows) == {"photo": "image"}
    with pytest.raises(DatasetError, match=r"row 1: it holds 1 image \(column 'photo'\)"):
        refuse_media(rows, "hub:user/pictures")


def test_preference_pairs_with_images_are_refused():
    pair = {"prompt": "<image>Which?", "chosen": "The left.", "rejected": "No idea.", "images": ["a.jpg"]}
    with pytest.raises(DatasetError, match=r"^p.json, row 1: it holds 1 image"):
        normalize_preference(datasets.Dataset.from_list([pair]), FormatType.preference, "p.json")


def test_check_and_start_refuse_before_any_model_loads(tmp_path, datasets_dir):
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(datasets_dir))
    request = TrainingStartRequest(local_datasets=[str(datasets_dir / "mllm_demo.json")])
    report = run_preflight(request, settings, estimates=False)
    assert [e.code for e in report.errors] == ["data_error"]
    assert "mllm_demo.json, row 1: it holds 2 images" in report.errors[0].message
    with pytest.raises(DatasetError, match="mllm_demo.json, row 1: it holds 2 images"):
        admit(request, settings, None)


def test_a_text_file_that_mentions_images_is_still_text(tmp_path):
    path = tmp_path / "talk.json"
    path.write_text(json.dumps([{"instruction": "What does <image> mean in HTML?", "output": "Nothing; <img> is."}]))
    assert inspect_dataset(str(path)).rows_total == 1
