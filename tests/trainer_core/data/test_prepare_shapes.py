"""Data shapes read as users bring them: numbers in text columns, OpenAI content
parts, compressed files, folders, save_to_disk folders, the Hub offline, and CLI exits without
"leaked semaphore" warnings. Files are built in tmp_path from the shared datasets."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import datasets
import pandas as pd
import pytest

from trainer_core.admission.request_paths import MissingPaths, checked_request
from trainer_core.data.files import DatasetError, read_file, read_head, reading_notes
from trainer_core.data.inspect import inspect_dataset
from trainer_core.data.prepare import load_conversations
from trainer_core.data.preview import preview
from trainer_core.paths import PathNotAllowed
from trainer_core.schemas import TrainingStartRequest

REPO = Path(__file__).resolve().parents[3]


def alpaca_rows(datasets_dir: Path, n: int) -> list[dict]:
    return json.loads((datasets_dir / "alpaca_en_demo.json").read_text(encoding="utf-8"))[:n]


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def conversations(path: str) -> list[list[dict]]:
    return load_conversations(TrainingStartRequest(local_datasets=[path]))[0]["messages"]


def chat(*turns: tuple[str, object]) -> dict:
    return {"messages": [{"role": role, "content": content} for role, content in turns]}


# --- 1. numbers and booleans in text columns ---


def test_numbers_and_booleans_become_text_with_a_note(tmp_path: Path, datasets_dir: Path) -> None:
    rows = alpaca_rows(datasets_dir, 10)
    rows[0]["output"], rows[1]["output"], rows[2]["output"], rows[3]["output"] = 42, 3.5, 7, True
    rows[4]["input"] = True
    path = tmp_path / "alpaca_numbers.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    messages = conversations(str(path))
    assert [m[-1]["content"] for m in messages[:4]] == ["42", "3.5", "7", "true"]
    assert messages[4][0]["content"] == rows[4]["instruction"] + "\n\ntrue"
    expected = [
        "column 'input': 1 boolean turned into text",
        "column 'output': 3 numbers and 1 boolean turned into text",
    ]
    assert reading_notes(str(path)) == expected
    found = inspect_dataset(str(path))
    assert found.notes == expected and found.rows_total == 10
    assert preview(str(path), rows=2)[1]["conversation"][0].endswith("assistant: 42")


def test_a_column_of_numbers_used_as_text(tmp_path: Path) -> None:
    """A Parquet (or JSON) column holding only numbers, read as int64, is still text to the layout."""
    path = tmp_path / "sums.parquet"
    pd.DataFrame({"instruction": ["1+1", "2+2", "3+3"], "output": [2, 4, 6]}).to_parquet(path)
    assert [m[-1]["content"] for m in conversations(str(path))] == ["2", "4", "6"]
    assert reading_notes(str(path)) == ["column 'output': 3 numbers turned into text"]


def test_csv_is_text_already(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("instruction,output\nhow many,42\n", encoding="utf-8")
    assert conversations(str(path))[0][-1]["content"] == "42" and reading_notes(str(path)) == []


def test_lists_beside_text_are_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text(
        jsonl([{"instruction": "a", "output": "x"}, {"instruction": "b", "output": ["y"]}]), encoding="utf-8"
    )
    with pytest.raises(DatasetError, match=r"odd.jsonl: column 'output' is text in row 1 but a list in row 2"):
        read_file(str(path))


# --- 2. OpenAI content parts ---


def test_content_parts_are_joined(tmp_path: Path) -> None:
    rows = [
        chat(
            ("system", [{"type": "text", "text": "Be brief."}]),
            ("user", [{"type": "text", "text": "Line one"}, {"type": "input_text", "text": "Line two"}]),
            ("assistant", [{"type": "output_text", "text": "Done."}]),
        ),
        chat(("user", "plain"), ("assistant", 12)),
    ]
    path = tmp_path / "parts.jsonl"
    path.write_text(jsonl(rows), encoding="utf-8")
    assert conversations(str(path)) == [
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Line one\nLine two"},
            {"role": "assistant", "content": "Done."},
        ],
        [{"role": "user", "content": "plain"}, {"role": "assistant", "content": "12"}],
    ]
    assert reading_notes(str(path)) == ["column 'messages': 1 number turned into text"]


def test_sharegpt_values_as_parts(tmp_path: Path) -> None:
    row = {
        "conversations": [
            {"from": "human", "value": [{"type": "text", "text": "hi"}]},
            {"from": "gpt", "value": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        ]
    }
    path = tmp_path / "share.json"
    path.write_text(json.dumps([row]), encoding="utf-8")
    assert conversations(str(path))[0][-1] == {"role": "assistant", "content": "a\nb"}


@pytest.mark.parametrize(
    "part,kind",
    [
        (
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            "an image part (type 'image_url')",
        ),
        ({"type": "input_image", "image_url": "data:image/png;base64,AAAA"}, "an image part (type 'input_image')"),
        (
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            "an audio part (type 'input_audio')",
        ),
    ],
)
def test_media_parts_are_refused_naming_the_row(tmp_path: Path, part: dict, kind: str) -> None:
    rows = [
        chat(("user", "hi"), ("assistant", "hello")),
        chat(("user", [{"type": "text", "text": "What is this?"}, part]), ("assistant", "A cat.")),
    ]
    path = tmp_path / "vision.jsonl"
    path.write_text(jsonl(rows), encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        conversations(str(path))
    assert str(info.value).startswith(
        f"vision.jsonl, row 2: turn 1 (user), content part 2 is {kind}; this model reads text only: remove image"
    )


def test_unknown_part_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tool.json"
    path.write_text(
        json.dumps([chat(("user", "hi"), ("assistant", [{"type": "tool_use", "id": "x"}]))]), encoding="utf-8"
    )
    with pytest.raises(
        DatasetError, match=r"tool.json, row 1: turn 2 \(assistant\), content part 1 is not a text part"
    ):
        conversations(str(path))


# --- 3. compressed files ---


def compressed(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    data = text.encode("utf-8")
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    else:
        import zstandard

        path.write_bytes(zstandard.ZstdCompressor().compress(data))
    return path


@pytest.mark.parametrize("name", ["identity.json.gz", "identity.jsonl.gz", "identity.csv.gz", "identity.jsonl.zst"])
def test_compressed_files(tmp_path: Path, datasets_dir: Path, name: str) -> None:
    rows = json.loads((datasets_dir / "identity.json").read_text(encoding="utf-8"))
    if ".csv" in name:
        text = pd.DataFrame(rows).to_csv(index=False)
    else:
        text = json.dumps(rows) if ".json." in name else jsonl(rows)
    path = compressed(tmp_path, name, text)
    dataset = read_file(str(path))
    assert len(dataset) == 91 and dataset[0]["instruction"] == "hi"
    assert [row["output"] for row in read_head(str(path), 2)] == [rows[0]["output"], rows[1]["output"]]
    assert len(conversations(str(path))) == 91


def test_json_problem_on_compressed_text(tmp_path: Path) -> None:
    path = compressed(tmp_path, "bad.jsonl.gz", '{"text": "a"}\n{"text": "b"\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl.gz: invalid JSON at line 2 \(row 2\), column 13"):
        read_file(str(path))
    broken = tmp_path / "cut.json.gz"
    broken.write_bytes(gzip.compress(b'[{"text": "a"}]')[:12])
    with pytest.raises(DatasetError, match=r"cut.json.gz: cannot be decompressed"):
        read_file(str(broken))


def test_uploads_accept_compressed_files() -> None:
    from gradio_client.utils import is_valid_file

    from ui.uploads import DATASET_TYPES

    for name in ("a.json.gz", "a.jsonl.gz", "a.csv.gz", "a.jsonl.zst", "a.parquet", "A.JSONL.GZ"):
        assert is_valid_file(name, DATASET_TYPES), name
    assert not is_valid_file("a.exe", DATASET_TYPES) and not is_valid_file("a.parquet.gz", DATASET_TYPES)


def test_kept_upload_keeps_the_whole_suffix(tmp_path: Path, monkeypatch) -> None:
    import gradio.utils

    from trainer_core.settings import Settings
    from ui.uploads import keep_upload

    monkeypatch.setattr(gradio.utils, "get_upload_folder", lambda: str(tmp_path / "gradio"))
    (tmp_path / "gradio").mkdir()
    source = compressed(tmp_path / "gradio", "rows.jsonl.zst", '{"text": "a"}\n')
    kept = Path(keep_upload(str(source), Settings(data_dir=tmp_path / "data")))
    assert kept.name.startswith("rows-") and kept.name.endswith(".jsonl.zst")
    assert read_file(str(kept))["text"] == ["a"]


def _bomb(tmp_path: Path, name: str, megabytes: int) -> Path:
    """A small compressed file holding ``megabytes`` MB of one JSON / CSV / text value."""
    filler = "a" * (megabytes * 1024 * 1024)
    if ".csv" in name:
        text = "text\n" + filler + "\n"
    elif ".txt" in name:
        text = filler + "\n"
    else:
        text = '{"text": "' + filler + '"}\n' if ".jsonl" in name else '[{"text": "' + filler + '"}]'
    return compressed(tmp_path, name, text)


@pytest.mark.parametrize("name", ["bomb.json.gz", "bomb.jsonl.zst", "bomb.csv.gz", "bomb.txt.zst"])
def test_decompression_bomb_is_refused_quickly(tmp_path: Path, monkeypatch, name: str) -> None:
    from trainer_core.data import compressed as compression

    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 1024 * 1024)
    path = _bomb(tmp_path, name, 3)  # 3 MB: over the cap below, within the limit of one value (data.row_size)
    assert path.stat().st_size < 100_000
    started = time.perf_counter()
    message = rf"^{name}: decompresses to more than 1 MB: .*STUDIO_MAX_DATA_BYTES"
    with pytest.raises(DatasetError, match=message):
        read_file(str(path))
    with pytest.raises(DatasetError, match=message):
        read_head(str(path), 2)
    assert time.perf_counter() - started < 5
    folder = tmp_path / "folder"  # a folder's JSON files are looked at through a prefix only
    folder.mkdir()
    path.rename(folder / name)
    with pytest.raises(DatasetError, match=message):
        read_file(str(folder))
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", 32 * 1024 * 1024)  # under the cap: read
    assert len(read_head(str(folder / name), 1)[0]["text"]) == 3 * 1024 * 1024


def test_decompression_cap_from_the_environment(monkeypatch) -> None:
    from trainer_core.data import compressed as compression

    assert compression.MAX_DECOMPRESSED_BYTES == compression._limit_from_env() or os.environ.get(
        "STUDIO_MAX_DATA_BYTES"
    )
    monkeypatch.delenv("STUDIO_MAX_DATA_BYTES", raising=False)
    assert compression._limit_from_env() == 2 * 1024**3
    monkeypatch.setenv("STUDIO_MAX_DATA_BYTES", "1000")
    assert compression._limit_from_env() == 1000
    monkeypatch.setenv("STUDIO_MAX_DATA_BYTES", "lots")
    with pytest.raises(ValueError, match="STUDIO_MAX_DATA_BYTES='lots' is not a positive number of bytes"):
        compression._limit_from_env()


def test_truncated_zstandard_file(tmp_path: Path, datasets_dir: Path) -> None:
    import zstandard

    rows = json.loads((datasets_dir / "identity.json").read_text(encoding="utf-8"))
    whole = zstandard.ZstdCompressor().compress(jsonl(rows).encode("utf-8"))
    for name in ("cut.jsonl.zst", "cut.json.zst", "cut.csv.zst", "cut.txt.zst"):
        data = pd.DataFrame(rows).to_csv(index=False).encode("utf-8") if ".csv" in name else jsonl(rows).encode("utf-8")
        cut = tmp_path / name
        cut.write_bytes(zstandard.ZstdCompressor().compress(data)[:-40])
        with pytest.raises(
            DatasetError,
            match=rf"^{name}: cannot be decompressed \(the Zstandard data ends early: "
            r"the file is truncated\): check that the file is complete",
        ):
            read_file(str(cut))
    two_frames = tmp_path / "frames.jsonl.zst"  # frames one after another (zstd -c a b, pzstd) are all read
    two_frames.write_bytes(whole + zstandard.ZstdCompressor().compress(jsonl(rows[:5]).encode("utf-8")))
    assert len(read_file(str(two_frames))) == 96


# --- 4. folders ---


def test_folder_of_files_ignores_a_stray_report(tmp_path: Path, datasets_dir: Path) -> None:
    rows = alpaca_rows(datasets_dir, 30)
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "part-a.jsonl").write_text(jsonl(rows[:10]), encoding="utf-8")
    (folder / "part-b.json").write_text(json.dumps(rows[10:30]), encoding="utf-8")
    (folder / "report.json").write_text(json.dumps({"accuracy": 0.9, "rows": 30}), encoding="utf-8")
    (folder / "README.md").write_text("notes", encoding="utf-8")
    assert len(read_file(str(folder))) == 30
    messages = conversations(str(folder))
    assert len(messages) == 30 and messages[10][0]["content"].startswith(rows[10]["instruction"])
    assert reading_notes(str(folder)) == ["folder shards: report.json left out: it holds one JSON object, not rows"]
    assert inspect_dataset(str(folder)).rows_total == 30


def test_folder_nested_split_files(tmp_path: Path) -> None:
    folder = tmp_path / "hub_clone"
    (folder / "data").mkdir(parents=True)
    pd.DataFrame({"text": ["a", "b"]}).to_parquet(folder / "data" / "train-00000-of-00001.parquet")
    pd.DataFrame({"text": ["z"]}).to_parquet(folder / "data" / "test-00000-of-00001.parquet")
    assert read_file(str(folder))["text"] == ["a", "b"]
    notes = reading_notes(str(folder))
    assert notes[0] == (
        "folder hub_clone: its test files (data/test-00000-of-00001.parquet) are not read for "
        "training; give them as evaluation data if they are"
    )


def test_folder_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.md").write_text("x", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"^folder empty has no \.json/\.jsonl/\.csv/\.parquet/\.txt data files: "):
        read_file(str(empty))
    only_report = tmp_path / "report_only"
    only_report.mkdir()
    (only_report / "report.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(
        DatasetError, match=r"folder report_only has no .* data files with rows: .*report.json left out"
    ):
        read_file(str(only_report))
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.csv").write_text("text\nx\n", encoding="utf-8")
    (mixed / "b.jsonl").write_text('{"text": "y"}\n', encoding="utf-8")
    with pytest.raises(
        DatasetError, match=r"folder mixed mixes kinds of data files: a.csv \(.csv\), b.jsonl \(.jsonl\)"
    ):
        read_file(str(mixed))


def test_folder_paths_are_confined(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    folder = allowed / "data"
    folder.mkdir(parents=True)
    outside.mkdir()
    (folder / "a.jsonl").write_text('{"text": "a"}\n', encoding="utf-8")
    request = checked_request(TrainingStartRequest(local_datasets=[str(folder)]), [allowed])
    assert request.local_datasets == [str(folder.resolve())]
    (outside / "secret.jsonl").write_text('{"text": "secret"}\n', encoding="utf-8")
    (folder / "b.jsonl").symlink_to(outside / "secret.jsonl")
    with pytest.raises(PathNotAllowed, match="local_datasets: .*b.jsonl is outside the allowed folders"):
        checked_request(TrainingStartRequest(local_datasets=[str(folder)]), [allowed])
    (folder / "b.jsonl").unlink()
    (folder / "sub").symlink_to(outside, target_is_directory=True)  # a linked sub-folder, too
    with pytest.raises(PathNotAllowed, match="secret.jsonl is outside the allowed folders"):
        checked_request(
            TrainingStartRequest(local_eval_datasets=[str(folder)], local_datasets=[str(folder / "a.jsonl")]), [allowed]
        )
    with pytest.raises(MissingPaths):
        checked_request(TrainingStartRequest(local_datasets=[str(allowed / "nope")]), [allowed])


# --- 5. save_to_disk folders ---


def test_save_to_disk_dataset_and_dict(tmp_path: Path, datasets_dir: Path) -> None:
    rows = alpaca_rows(datasets_dir, 12)
    single = tmp_path / "saved"
    datasets.Dataset.from_list(rows).save_to_disk(str(single))
    assert read_file(str(single)).to_list() == rows
    assert len(conversations(str(single))) == 12
    both = tmp_path / "saved_dict"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:8]), "test": datasets.Dataset.from_list(rows[8:])}
    ).save_to_disk(str(both))
    assert len(read_file(str(both))) == 8 and inspect_dataset(str(both)).rows_total == 8
    no_train = tmp_path / "saved_eval"
    datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows[:2])}).save_to_disk(str(no_train))
    with pytest.raises(DatasetError, match=r"folder saved_eval holds the splits \['validation'\] but no 'train' split"):
        read_file(str(no_train))


def _outside_saved(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(allowed root, a saved dataset outside it holding the row "secret", that dataset's arrow file)."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    datasets.Dataset.from_dict({"text": ["secret"]}).save_to_disk(str(outside / "sec"))
    arrow = next((outside / "sec").glob("*.arrow"))
    return allowed, outside / "sec", arrow


@pytest.fixture()
def loads(monkeypatch) -> list[str]:
    """Folders datasets.load_from_disk is asked to load (the call goes through)."""
    calls: list[str] = []
    real = datasets.load_from_disk

    def record(path, *args, **kwargs):
        calls.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_from_disk", record)
    return calls


def test_saved_dataset_file_names_cannot_leave_the_allowed_folders(tmp_path: Path, loads: list[str]) -> None:
    allowed, _, arrow = _outside_saved(tmp_path)
    folder = allowed / "saved"
    datasets.Dataset.from_dict({"text": ["mine"]}).save_to_disk(str(folder))
    state_file = folder / "state.json"
    state = json.loads(state_file.read_text(encoding="utf-8"))
    for name in (str(arrow), os.path.relpath(arrow, folder)):  # an absolute name, then ../../outside/...
        state["_data_files"] = [{"filename": name}]
        state_file.write_text(json.dumps(state), encoding="utf-8")
        assert datasets.load_from_disk(str(folder))["text"] == ["secret"]  # what load_from_disk alone does
        loads.clear()
        # the shown path is cut at 120 characters: long temporary folders hide its ".arrow"
        with pytest.raises(PathNotAllowed, match=r"local_datasets: .*data-0.* is outside the allowed folders"):
            checked_request(TrainingStartRequest(local_datasets=[str(folder)]), [allowed])
        with pytest.raises(
            DatasetError,
            match=r"folder saved: the data file '.*' of state.json leads to .*, outside "
            "the dataset folder .*: save the dataset again with save_to_disk",
        ):
            read_file(str(folder))  # read without the path check: refused before datasets opens anything
        assert loads == []


def test_saved_dataset_split_link_cannot_leave_the_allowed_folders(
    tmp_path: Path, monkeypatch, loads: list[str]
) -> None:
    from trainer_core.data import folders

    allowed, outside_saved, _ = _outside_saved(tmp_path)
    folder = allowed / "saved_dict"
    folder.mkdir()
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}), encoding="utf-8")
    (folder / "train").symlink_to(outside_saved, target_is_directory=True)
    assert datasets.load_from_disk(str(folder))["train"]["text"] == ["secret"]  # what load_from_disk alone does
    loads.clear()
    read: list[Path] = []
    real_json = folders._saved_json
    monkeypatch.setattr(folders, "_saved_json", lambda at, file, key: read.append(file) or real_json(at, file, key))
    with pytest.raises(PathNotAllowed, match=r"local_datasets: .*train is outside the allowed folders"):
        checked_request(TrainingStartRequest(local_datasets=[str(folder)]), [allowed])
    with pytest.raises(
        DatasetError,
        match=r"folder saved_dict: the split 'train' of dataset_dict.json leads to .*, "
        "outside the dataset folder",
    ):
        read_file(str(folder))
    assert loads == [] and read and all(file.resolve().is_relative_to(allowed.resolve()) for file in read)
    (folder / "train").unlink()  # a split named by ..
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": ["../../outside/sec"]}), encoding="utf-8")
    with pytest.raises(PathNotAllowed, match=r"outside/sec is outside the allowed folders"):
        checked_request(TrainingStartRequest(local_datasets=[str(folder)]), [allowed])
    assert loads == []


def test_saved_dataset_inside_the_allowed_folders_still_reads(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    folder = allowed / "saved_dict"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"text": ["a", "b"]}), "test": datasets.Dataset.from_dict({"text": ["z"]})}
    ).save_to_disk(str(folder))
    request = checked_request(TrainingStartRequest(local_datasets=[str(folder)]), [allowed])
    assert request.local_datasets == [str(folder.resolve())]
    assert read_file(str(folder))["text"] == ["a", "b"]


@pytest.mark.parametrize(
    "file,content,shape",
    [
        ("dataset_dict.json", "{not json", "is not valid JSON"),
        ("dataset_dict.json", '{"splits": "train"}', r'does not hold \{"splits": \["train", ...\]\}'),
        ("train/state.json", '{"_data_files": [{"filename": 3}]}', r'does not hold \{"_data_files": '),
        ("train/state.json", "[]", r'does not hold \{"_data_files": '),
    ],
)
def test_malformed_saved_dataset_files_are_named(tmp_path: Path, file: str, content: str, shape: str) -> None:
    allowed = tmp_path / "allowed"
    folder = allowed / "saved_dict"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a"]})}).save_to_disk(str(folder))
    (folder / file).write_text(content, encoding="utf-8")
    message = rf"^folder saved_dict: {file} {shape}.*: save the dataset again with save_to_disk"
    with pytest.raises(DatasetError, match=message):
        checked_request(TrainingStartRequest(local_datasets=[str(folder)]), [allowed])
    with pytest.raises(DatasetError, match=message):
        read_file(str(folder))


# --- 6. Hub dataset offline ---


def test_hub_dataset_offline_is_a_clear_error(tmp_path: Path) -> None:
    """HF_HUB_OFFLINE=1 in a fresh process (huggingface_hub and datasets read it at import)."""
    code = (
        "from trainer_core.data.hub_data import read_hub\n"
        "from trainer_core.models.hub import HubCheckError, check_hub_dataset\n"
        "try:\n    read_hub('org/not-cached', 'sub', 'train', 'hf_SECRET_1')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
        "try:\n    check_hub_dataset('org/not-cached')\n"
        "except HubCheckError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "DatasetError dataset org/not-cached: HF_HUB_OFFLINE is set, so the Hugging Face Hub is not "
        "asked, and no cached copy exists; connect to the internet (and unset HF_HUB_OFFLINE) or use local files"
    )
    assert lines[1].startswith(
        "HubCheckError hf_dataset: org/not-cached is not in the local cache and the Hugging Face Hub cannot be reached"
    )
    assert "Traceback" not in done.stderr and "hf_SECRET_1" not in done.stdout


def test_hub_dataset_failure_in_load_conversations(monkeypatch) -> None:
    import trainer_core.models.hub

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr(trainer_core.models.hub, "hub_reachable", lambda timeout_s=3.0: True)

    def unreachable(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'org/data' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(
        DatasetError, match=r"^dataset org/data: the Hugging Face Hub could not be reached and no cached copy"
    ):
        load_conversations(TrainingStartRequest(hf_dataset="org/data", subset="x", train_split="train"))


# --- 7. no "leaked semaphore" warnings at exit ---

SLOW_TEARDOWN = """
import sys, time
from trainer_core.process.supervisor import WorkerProcess

def target(events, stop):
    from tqdm.contrib.concurrent import thread_map  # huggingface_hub downloads use it
    thread_map(str, [1, 2], disable=True)
    events.put(("done", {}))
    time.sleep(2)  # the worker is still tearing down when the parent exits

if __name__ == "__main__":
    worker = WorkerProcess.create(target)
    worker.start()
    print(worker.next_event(120))
"""


@pytest.mark.slow
def test_worker_tearing_down_at_exit_leaks_no_semaphore(tmp_path: Path) -> None:
    script = tmp_path / "slow_teardown.py"
    script.write_text(SLOW_TEARDOWN, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "('done', {})" in done.stdout
    assert "leaked semaphore" not in done.stderr, done.stderr


def cli(*args: str, timeout_s: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer_core", "train", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(os.environ, PYTHONWARNINGS="default"),
    )


def test_cli_missing_file_exits_cleanly(tmp_path: Path) -> None:
    done = cli("--dataset", str(tmp_path / "missing.json"))
    assert done.returncode == 2 and "dataset file not found" in done.stderr
    assert "leaked semaphore" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_cli_bad_file_exits_cleanly(tmp_path: Path, tiny_model_dir: Path) -> None:
    """A file that breaks off mid-row: exit 1, the file and line named, no traceback or leak."""
    bad = tmp_path / "bad.json"
    bad.write_text('[{"instruction": "a", "output": "b"},\n {"instruction": "c"', encoding="utf-8")
    done = cli(
        "--dataset",
        str(bad),
        "--max-steps",
        "1",
        "--output-dir",
        str(tmp_path / "out"),
        "--model-name",
        str(tiny_model_dir),
    )
    assert done.returncode == 1 and "bad.json: invalid JSON at line 2" in done.stderr, done.stderr[-2000:]
    assert "leaked semaphore" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_cli_trains_two_steps_on_a_compressed_file_with_parts_and_numbers(
    tmp_path: Path, datasets_dir: Path, tiny_model_dir: Path
) -> None:
    """A new shape end to end: .jsonl.zst, messages with content parts and a number, 2 steps."""
    rows = [
        chat(("user", [{"type": "text", "text": row["instruction"]}]), ("assistant", row["output"]))
        for row in alpaca_rows(datasets_dir, 8)
    ]
    rows[1]["messages"][1]["content"] = 42
    path = compressed(tmp_path, "chat.jsonl.zst", jsonl(rows))
    done = cli(
        "--dataset",
        str(path),
        "--max-steps",
        "2",
        "--batch-size",
        "2",
        "--max-seq-length",
        "128",
        "--output-dir",
        str(tmp_path / "out"),
        "--model-name",
        str(tiny_model_dir),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "completed: Training completed" in done.stdout
    metrics = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m.get("loss") is not None][-1] == 2
    assert "leaked semaphore" not in done.stderr, done.stderr[-2000:]
