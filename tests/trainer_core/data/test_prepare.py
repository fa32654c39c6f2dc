"""The façade: request -> canonical rows -> tokenized splits; previews of each shared file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from trainer_core.data.files import DatasetError
from trainer_core.data.prepare import has_eval_data, load_conversations
from trainer_core.data.prepared import PreparedData, prepare_data
from trainer_core.data.preview import preview
from trainer_core.data.tokenization import IGNORE
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType


def request(**fields) -> TrainingStartRequest:
    return TrainingStartRequest(**fields)


def shared(datasets_dir: Path, *names: str) -> list[str]:
    return [str(datasets_dir / name) for name in names]


def test_load_alpaca(datasets_dir: Path) -> None:
    rows, fmt = load_conversations(request(local_datasets=shared(datasets_dir, "alpaca_en_demo.json")))
    assert fmt == FormatType.alpaca and len(rows) == 999
    assert rows[0]["messages"][0] == {"role": "user", "content": "Describe a process of making crepes."}


def test_slice(datasets_dir: Path) -> None:
    files = shared(datasets_dir, "identity.json")
    rows, _ = load_conversations(request(local_datasets=files, dataset_slice_start=2, dataset_slice_end=5))
    assert [m[0]["content"] for m in rows["messages"]] == ["Who are you?", "What is your name?", "Do you have a name?"]
    with pytest.raises(DatasetError, match="the training data, which has 91 rows"):
        load_conversations(request(local_datasets=files, dataset_slice_end=92))
    with pytest.raises(DatasetError, match="which has 91 rows"):
        load_conversations(request(local_datasets=files, dataset_slice_start=91))


def test_slice_across_files_and_formats(datasets_dir: Path) -> None:
    files = shared(datasets_dir, "identity.json", "glaive_toolcall_en_demo.json")
    rows, fmt = load_conversations(request(local_datasets=files))
    assert fmt == FormatType.alpaca and len(rows) == 91 + 300  # format: the first file's
    assert rows[91]["tools"].startswith('[{"type": "function"') and rows[90]["tools"] == ""  # identity: none
    sliced, _ = load_conversations(request(local_datasets=files, dataset_slice_start=90, dataset_slice_end=92))
    assert sliced["messages"] == [rows[90]["messages"], rows[91]["messages"]]


def test_text_and_conversations_do_not_mix(datasets_dir: Path) -> None:
    with pytest.raises(
        DatasetError,
        match="identity.json holds conversations but c4_demo.jsonl holds raw text: train on them in separate runs",
    ):
        load_conversations(request(local_datasets=shared(datasets_dir, "identity.json", "c4_demo.jsonl")))


def test_dpo_is_refused(datasets_dir: Path) -> None:
    with pytest.raises(DatasetError, match="preference pairs"):
        load_conversations(request(local_datasets=shared(datasets_dir, "dpo_en_demo.json")))


def test_error_rows_are_file_rows_after_slicing(tmp_path: Path) -> None:
    chats = [{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}] * 5
    chats[3] = {"conversations": [{"from": "human", "value": "q"}, {"from": "bot", "value": "a"}]}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chats), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"chat.json, row 4: turn 2 has unknown role 'bot'"):
        load_conversations(request(local_datasets=[str(path)], dataset_slice_start=2))
    rows, _ = load_conversations(request(local_datasets=[str(path)], dataset_slice_end=3))
    assert len(rows) == 3


def test_custom_mapping_csv(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("question,answer\nWhat is 2+2?,4\nCapital of France?,Paris\n", encoding="utf-8")
    req = request(local_datasets=[str(path)], custom_format_mapping={"instruction": "question", "output": "answer"})
    rows, fmt = load_conversations(req)
    assert fmt == FormatType.alpaca
    assert rows[0]["messages"] == [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}]
    fmt, table = preview(str(path), mapping={"instruction": "question", "output": "answer"})
    assert (
        fmt == FormatType.alpaca and table["conversation"].tolist()[1] == "user: Capital of France?\nassistant: Paris"
    )
    with pytest.raises(DatasetError, match="qa.csv has columns \\['question', 'answer'\\]"):
        load_conversations(request(local_datasets=[str(path)]))
    with pytest.raises(DatasetError, match="maps 'output' to column 'reply', but qa.csv has no such column"):
        load_conversations(
            request(local_datasets=[str(path)], custom_format_mapping={"instruction": "question", "output": "reply"})
        )


def test_forced_format(tmp_path: Path) -> None:
    path = tmp_path / "pc.jsonl"
    path.write_text(json.dumps({"prompt": "P", "completion": "C", "text": "ignored"}) + "\n", encoding="utf-8")
    rows, fmt = load_conversations(request(local_datasets=[str(path)], format_type=FormatType.prompt_completion))
    assert fmt == FormatType.prompt_completion and rows[0]["messages"][1] == {"role": "assistant", "content": "C"}
    rows, fmt = load_conversations(request(local_datasets=[str(path)]))  # auto: prompt + completion beat text
    assert fmt == FormatType.prompt_completion


def test_prepare_data_with_eval(tokenizer, datasets_dir: Path) -> None:
    req = request(
        local_datasets=shared(datasets_dir, "identity.json"),
        local_eval_datasets=shared(datasets_dir, "alpaca_en_demo.json"),
        dataset_slice_end=40,
        max_seq_length=128,
    )
    assert has_eval_data(req)
    prepared = prepare_data(req, tokenizer)
    assert isinstance(prepared, PreparedData) and prepared.format == FormatType.alpaca
    assert prepared.train.column_names == ["input_ids", "labels"] and len(prepared.train) == prepared.stats.rows == 40
    assert prepared.eval is not None and prepared.eval_stats is not None
    assert prepared.eval_stats.rows + prepared.eval_stats.dropped_rows == 999  # the slice applies to training rows only
    assert prepared.eval_stats.truncated_rows > 0 and prepared.stats.max_seq_length == 128
    labels = prepared.train[0]["labels"]  # ... assistant text, <|im_end|> (trained), "\n" (not)
    assert labels[0] == IGNORE and labels[-2:] == [tokenizer.convert_tokens_to_ids("<|im_end|>"), IGNORE]


def test_prepare_data_without_eval(tokenizer, datasets_dir: Path) -> None:
    req = request(local_datasets=shared(datasets_dir, "c4_demo.jsonl"), dataset_slice_end=10, max_seq_length=64)
    prepared = prepare_data(req, tokenizer)
    assert prepared.eval is None and prepared.eval_stats is None and prepared.format == FormatType.text
    assert prepared.stats.trained_tokens == prepared.stats.total_tokens == 10 * 64  # every c4 row is longer


def test_hub_errors_hide_the_token(monkeypatch) -> None:
    import trainer_core.models.hub

    monkeypatch.setattr(trainer_core.models.hub, "hub_reachable", lambda timeout_s=3.0: False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    req = request(hf_dataset="org/data", hf_token="hf_SECRET_value_42")
    with pytest.raises(DatasetError) as info:
        load_conversations(req)
    assert "org/data" in str(info.value) and "could not be reached" in str(info.value)
    assert "hf_SECRET_value_42" not in str(info.value)


@pytest.mark.parametrize(
    "name,fmt,column,start",
    [
        (
            "alpaca_en_demo.json",
            FormatType.alpaca,
            "conversation",
            "user: Describe a process of making crepes.\nassistant: Making crepes",
        ),
        ("identity.json", FormatType.alpaca, "conversation", "user: hi\nassistant: Hello! I am {{name}}"),
        (
            "glaive_toolcall_en_demo.json",
            FormatType.sharegpt,
            "conversation",
            "tools: search_recipes\nuser: Hi, I have some ingredients",
        ),
        ("c4_demo.jsonl", FormatType.text, "text", "Don’t think you need all the bells and whistles?"),
    ],
)
def test_preview_shared_files(datasets_dir: Path, name: str, fmt: FormatType, column: str, start: str) -> None:
    started = time.perf_counter()
    detected, table = preview(str(datasets_dir / name))
    assert time.perf_counter() - started < 1.0
    assert detected == fmt
    assert list(table.columns) == ["row", column] and table["row"].tolist() == [1, 2, 3, 4, 5]
    assert table[column][0].startswith(start)
    assert all(len(cell) <= 300 for cell in table[column])


def test_preview_glaive_rows(datasets_dir: Path) -> None:
    path = datasets_dir / "glaive_toolcall_en_demo.json"
    _, table = preview(str(path), rows=10, format_type=FormatType.sharegpt)
    raw = json.loads(path.read_text(encoding="utf-8"))[:10]
    assert len(table) == 10
    for cell, row in zip(table["conversation"], raw):
        first_user = "user: " + row["conversations"][0]["value"]
        if row["tools"] in ("", "[]"):
            assert cell.startswith(first_user[:200])
        else:  # the functions by name, calls and results as such
            names = ", ".join(tool["name"] for tool in json.loads(row["tools"]))
            assert cell.startswith(f"tools: {names}\n{first_user}"[:200])
    call = json.loads(raw[0]["conversations"][3]["value"])
    assert f"\nassistant: call {call['name']} {{" in table["conversation"][0]


def test_preview_dpo_and_bad_files(datasets_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dpo_en_demo.json holds preference pairs"):
        preview(str(datasets_dir / "dpo_en_demo.json"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad.jsonl: invalid JSON at line 2 \(row 2\)"):
        preview(str(bad))


def test_preview_row_keys_beyond_the_first(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [
        {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
        {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}], "system": "S"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    _, table = preview(str(path))
    assert table["conversation"].tolist() == ["user: q\nassistant: a", "system: S\nuser: q\nassistant: a"]
