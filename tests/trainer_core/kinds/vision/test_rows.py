"""Image rows as users bring them, kept for a vision-language model: LLaMA-Factory's
``images`` lists, ShareGPT ``conversations``, OpenAI content parts (a path or a ``data:`` URL) and a
Hub ``Image`` column; and each refusal by file and row (a missing image, a marker count that differs
from the image count, a path outside the allowed folders, an oversized image, a remote URL)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import datasets
import pytest

from tests.support import bad_images
from trainer_core.data import images as image_files
from trainer_core.data.errors import DatasetError
from trainer_core.data.files import read_file
from trainer_core.data.prepare import load_conversations
from trainer_core.kinds.vision.rows import has_images, normalize_vision
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType

ANSWER = "A ball."


@pytest.fixture
def pictures(tmp_path: Path, datasets_dir: Path) -> Path:
    """A data folder with the demo's three pictures in ``pics/``."""
    folder = tmp_path / "data"
    shutil.copytree(datasets_dir / "mllm_demo_data", folder / "pics")
    return folder


def write(folder: Path, rows: list[dict], name: str = "rows.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def vision_rows(path: Path, roots=()) -> datasets.Dataset:
    return normalize_vision(read_file(str(path)), FormatType.auto, path.name, path.parent, roots)[0]


def chat(user: str, images: list) -> dict:
    return {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": ANSWER}], "images": images}


def test_llama_factorys_demo_file_keeps_its_markers_and_resolves_its_paths(datasets_dir):
    rows = vision_rows(datasets_dir / "mllm_demo.json")
    assert len(rows) == 6 and rows.column_names == ["messages", "images"]
    first = rows[0]
    assert first["messages"][0] == {"role": "user", "content": "<image>Who are they?"}
    assert first["images"] == [str((datasets_dir / "mllm_demo_data" / "1.jpg").resolve())] * 2  # links resolved
    assert all(sum(m["content"].count("<image>") for m in row["messages"]) == len(row["images"]) for row in rows)


def test_sharegpt_conversations_with_images(pictures):
    rows = [
        {
            "conversations": [{"from": "human", "value": "<image>What is it?"}, {"from": "gpt", "value": ANSWER}],
            "images": ["pics/2.jpg"],
        }
    ]
    rows.append({**rows[0], "tools": json.dumps([{"name": "zoom", "parameters": {"type": "object"}}])})
    kept = vision_rows(write(pictures, rows))
    assert kept[0]["messages"][-1] == {"role": "assistant", "content": ANSWER}
    assert kept[0]["images"] == [str(pictures / "pics" / "2.jpg")]
    assert kept[0]["messages"][0]["role"] == "user"  # no tools: no system message
    system = kept[1]["messages"][0]  # the processor gets no tools=: the fallback block, as before
    assert system["role"] == "system" and system["content"].startswith("You have access to the following tools:")


def test_openai_content_parts_with_a_path_and_a_data_url(pictures):
    encoded = base64.b64encode((pictures / "pics" / "3.jpg").read_bytes()).decode()
    parts = [
        {"type": "text", "text": "Compare"},
        {"type": "image_url", "image_url": {"url": "pics/1.jpg"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{encoded}"}},
    ]
    rows = [{"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": ANSWER}]}]
    path = write(pictures, rows)
    assert has_images(read_file(str(path)))
    kept = vision_rows(path)
    assert kept[0]["messages"][0]["content"] == "Compare\n<image>\n<image>"
    assert kept[0]["images"][0] == str(pictures / "pics" / "1.jpg")
    assert kept[0]["images"][1].startswith("data:image/jpeg;base64,")
    assert image_files.open_image(kept[0]["images"][1]).size == image_files.check_image(
        str(pictures / "pics" / "3.jpg")
    )


def test_a_hub_image_column_goes_before_the_first_user_turn(datasets_dir):
    picture = (datasets_dir / "mllm_demo_data" / "2.jpg").read_bytes()
    hub = datasets.Dataset.from_dict(
        {"question": ["Who is he?"], "answer": [ANSWER], "image": [{"bytes": picture, "path": None}]},
        features=datasets.Features(
            {"question": datasets.Value("string"), "answer": datasets.Value("string"), "image": datasets.Image()}
        ),
    )
    mapped = hub.rename_columns({"question": "instruction", "answer": "output"})
    kept, _ = normalize_vision(mapped, FormatType.auto, "hub [train]", None, [])
    assert kept[0]["messages"][0]["content"] == "<image>Who is he?"
    assert kept[0]["images"][0].startswith("data:image/*;base64,")
    assert (
        image_files.open_image(kept[0]["images"][0]).size
        == image_files.open_image(str(datasets_dir / "mllm_demo_data" / "2.jpg")).size
    )


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (chat("<image>Who?", ["pics/missing.jpg"]), r"rows.json, row 2: image pics/missing.jpg was not found"),
        (
            chat("<image><image>Who?", ["pics/1.jpg"]),
            r"rows.json, row 2: its turns hold 2 <image> marker\(s\) but it has 1",
        ),
        (chat("<image>Who?", ["../../outside.jpg"]), r"rows.json, row 2: image: .*outside.jpg is outside the allowed"),
        (
            chat("<image>Who?", ["https://example.com/a.jpg"]),
            r"rows.json, row 2: image https://example.com/a.jpg is a remote URL",
        ),
        (chat("<image>Who?", ["rows.json"]), r"rows.json, row 2: image rows.json cannot be read as an image"),
    ],
)
def test_each_bad_image_is_refused_by_file_and_row(pictures, row, expected):
    (pictures.parent.parent / "outside.jpg").write_bytes((pictures / "pics" / "1.jpg").read_bytes())
    path = write(pictures, [chat("<image>Fine", ["pics/1.jpg"]), row])
    with pytest.raises(DatasetError, match=expected):
        vision_rows(path)


def test_an_image_with_too_many_pixels_is_refused_before_decoding(pictures, monkeypatch):
    monkeypatch.setattr(image_files, "MAX_PIXELS", 300 * 160)
    path = write(pictures, [chat("<image>Who?", ["pics/1.jpg"])])
    with pytest.raises(DatasetError, match=r"row 1: image 1.jpg is 300 x 168 pixels, more than the limit of 48,000"):
        vision_rows(path)


def test_a_decompression_bomb_is_refused_by_row_as_a_path_a_data_url_and_hub_bytes(pictures):
    """A 30,000 x 30,000 PNG (900 M pixels in ~110 KB): PIL raises its own DecompressionBombError
    inside ``Image.open`` above twice its limit, which once reached the API as a 500."""
    bomb = bad_images.bomb_png()
    (pictures / "pics" / "bomb.png").write_bytes(bomb)
    data_url = "data:image/png;base64," + base64.b64encode(bomb).decode()
    said = r"is over 128,000,000 pixels, more than the limit of 64,000,000: resize it \(or raise STUDIO_MAX_IMAGE"
    for reference, name in (("pics/bomb.png", "bomb.png"), (data_url, r"\(data: URL\)")):
        path = write(pictures, [chat("<image>Fine", ["pics/1.jpg"]), chat("<image>Who?", [reference])])
        with pytest.raises(DatasetError, match=rf"^rows.json, row 2: image {name} {said}"):
            vision_rows(path)
    hub = datasets.Dataset.from_dict(
        {"instruction": ["Who?"], "output": [ANSWER], "image": [{"bytes": bomb, "path": None}]},
        features=datasets.Features(
            {"instruction": datasets.Value("string"), "output": datasets.Value("string"), "image": datasets.Image()}
        ),
    )
    with pytest.raises(DatasetError, match=rf"^hub \[train\], row 1: image \(data: URL\) {said}"):
        normalize_vision(hub, FormatType.auto, "hub [train]", None, [])
    as_text = write(pictures, [chat("<image>Who?", [{"bytes": "iVBORw0KGgo="}])])  # JSON has no bytes
    with pytest.raises(DatasetError, match=r'row 1: an image\'s "bytes" must be the file\'s bytes .* not str'):
        vision_rows(as_text)


def test_a_truncated_jpeg_is_refused_by_row_when_the_data_is_read(pictures):
    """Decoded whole when read (the check, Start, training's load), not first in a training step."""
    bad_images.truncated_copy(pictures / "pics" / "2.jpg", pictures / "pics" / "cut.jpg")
    path = write(pictures, [chat("<image>Fine", ["pics/1.jpg"]), chat("<image>Who?", ["pics/cut.jpg"])])
    with pytest.raises(DatasetError, match=r"^rows.json, row 2: image cut.jpg cannot be read as an image \(OSError: "):
        vision_rows(path)
    assert image_files.check_image(str(pictures / "pics" / "2.jpg")) == (300, 199)


def test_an_absolute_path_must_be_in_an_allowed_folder(pictures, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(pictures / "pics" / "1.jpg", elsewhere / "x.jpg")
    path = write(pictures, [chat("<image>Who?", [str(elsewhere / "x.jpg")])])
    with pytest.raises(DatasetError, match="outside the allowed folders"):
        vision_rows(path)
    assert vision_rows(path, roots=[elsewhere])[0]["images"] == [str(elsewhere / "x.jpg")]


def test_a_text_only_model_refuses_image_rows_naming_vision_models(datasets_dir, tiny_model_dir, monkeypatch):
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir), local_datasets=[str(datasets_dir / "mllm_demo.json")]
    )
    with pytest.raises(DatasetError) as refused:
        load_conversations(request)
    message = str(refused.value)
    assert message.startswith("mllm_demo.json, row 1: it holds 2 images") and "this model reads text only" in message
    assert "Qwen/Qwen2-VL-2B-Instruct" in message


def test_is_dataset_image_on_needs_images_and_off_refuses_them(datasets_dir, tiny_vl_dir, monkeypatch):
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", f"{datasets_dir}:{tiny_vl_dir.parent}")
    from trainer_core.settings import get_settings

    get_settings.cache_clear()
    try:
        base = dict(model_name=str(tiny_vl_dir), local_datasets=[str(datasets_dir / "mllm_demo.json")])
        rows, _ = load_conversations(TrainingStartRequest(**base))
        assert rows.column_names == ["messages", "images"]
        with pytest.raises(DatasetError, match="this model reads text only"):
            load_conversations(TrainingStartRequest(**base, is_dataset_image=False))
        text = dict(base, local_datasets=[str(datasets_dir / "identity.json")], is_dataset_image=True)
        with pytest.raises(DatasetError, match="is_dataset_image: it is on, but no row of the data holds an image"):
            load_conversations(TrainingStartRequest(**text))
    finally:
        get_settings.cache_clear()
