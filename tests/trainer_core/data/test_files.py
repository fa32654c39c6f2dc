"""Reading local files and the Hub: every supported type, and every way a file can be wrong."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from trainer_core.data import files as datafiles
from trainer_core.data.files import DatasetError, read_file, read_files, read_head
from trainer_core.data.hub_data import read_hub


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


# --- reading each type ---


def test_reads_shared_files(datasets_dir: Path) -> None:
    alpaca = read_files([str(datasets_dir / "alpaca_en_demo.json")])
    assert len(alpaca) == 999 and alpaca.column_names == ["instruction", "input", "output"]
    assert alpaca[0]["instruction"] == "Describe a process of making crepes."
    c4 = read_files([str(datasets_dir / "c4_demo.jsonl")])
    assert len(c4) == 300 and c4.column_names == ["text"]
    assert c4[0]["text"].startswith("Don’t think you need all the bells and whistles?")
    glaive = read_files([str(datasets_dir / "glaive_toolcall_en_demo.json")])
    assert len(glaive) == 300 and set(glaive.column_names) == {"conversations", "tools"}
    assert glaive[0]["conversations"][3] == {
        "from": "function_call",
        "value": '{"name": "search_recipes", "arguments": {"ingredients": ["chicken", "bell peppers", "rice"]}}',
    }


def test_concatenates_files_in_order(datasets_dir: Path) -> None:
    both = read_files([str(datasets_dir / "identity.json"), str(datasets_dir / "alpaca_en_demo.json")])
    assert len(both) == 91 + 999
    assert both[0]["instruction"] == "hi"
    assert both[91]["instruction"] == "Describe a process of making crepes."


def test_json_lines_in_a_json_file(tmp_path: Path) -> None:
    path = write(tmp_path, "lines.json", jsonl([{"text": "a"}, {"text": "b"}]))
    assert read_file(path)["text"] == ["a", "b"]


def test_single_object_json(tmp_path: Path) -> None:
    path = write(tmp_path, "one.json", '{"instruction": "a", "output": "b"}')
    assert read_file(path).to_list() == [{"instruction": "a", "output": "b"}]


def test_csv_values_stay_text(tmp_path: Path) -> None:
    path = write(tmp_path, "qa.csv", 'question,answer\nWhat is 2+2?,4\n"Two\nlines",2.50\nempty,\n')
    dataset = read_file(path)
    assert dataset.to_list() == [
        {"question": "What is 2+2?", "answer": "4"},
        {"question": "Two\nlines", "answer": "2.50"},
        {"question": "empty", "answer": None},
    ]


def test_parquet(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    pd.DataFrame({"prompt": ["p1", "p2"], "completion": ["c1", "c2"]}).to_parquet(path)
    assert read_file(str(path)).to_list() == [
        {"prompt": "p1", "completion": "c1"},
        {"prompt": "p2", "completion": "c2"},
    ]


def test_txt_one_row_per_nonblank_line(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.txt", "line one\nline two\n\n   \nline four\n")
    dataset = read_file(path)
    assert dataset.column_names == ["text"]
    assert dataset["text"] == ["line one", "line two", "line four"]


# --- errors ---


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nope\.json does not exist"):
        read_files([str(tmp_path / "nope.json")])


def test_no_files() -> None:
    with pytest.raises(DatasetError, match="no data files"):
        read_files([])


def test_unsupported_extension(tmp_path: Path) -> None:
    path = write(tmp_path, "data.xlsx", "x")
    with pytest.raises(DatasetError) as info:
        read_files([path])
    message = str(info.value)
    assert "data.xlsx" in message and "'.xlsx'" in message
    for ext in (".json", ".jsonl", ".csv", ".parquet", ".txt"):
        assert ext in message


@pytest.mark.parametrize("name,text", [("e.json", ""), ("e.jsonl", "\n\n"), ("e.csv", ""), ("e.txt", "  \n")])
def test_empty_file(tmp_path: Path, name: str, text: str) -> None:
    with pytest.raises(DatasetError, match=rf"{name} is empty"):
        read_files([write(tmp_path, name, text)])


@pytest.mark.parametrize("name,text", [("rows.json", "[]"), ("rows.csv", "question,answer\n")])
def test_zero_rows(tmp_path: Path, name: str, text: str) -> None:
    with pytest.raises(DatasetError, match=rf"{name} has no rows"):
        read_files([write(tmp_path, name, text)])


def test_jsonl_line_that_is_a_list(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"rows.jsonl: line 1 \(row 1\) is a list, not a JSON object"):
        read_files([write(tmp_path, "rows.jsonl", "[]\n")])


@pytest.mark.parametrize(
    "text, needle",
    [("null\n", "holds NoneType"), ("  null  ", "holds NoneType"), ('[{"text": "a"}, null]', "row 2 is NoneType")],
)
def test_null_json_is_an_error_not_a_crash(tmp_path: Path, text: str, needle: str) -> None:
    # pyarrow's JSON reader segfaults on a top-level null; the stdlib check must come first
    from trainer_core.data.preview import preview

    path = write(tmp_path, "null.json", text)
    for read in (lambda p: read_files([p]), preview):
        with pytest.raises(DatasetError, match=needle):
            read(path)


def test_csv_without_header(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no header line"):
        read_file(write(tmp_path, "h.csv", ",\nx,y\n"))


def test_malformed_json_array_names_line_and_column(tmp_path: Path) -> None:
    text = '[\n  {"instruction": "a", "output": "b"},\n  {"instruction": "c" "output": "d"}\n]\n'
    with pytest.raises(DatasetError) as info:
        read_files([write(tmp_path, "broken.json", text)])
    message = str(info.value)
    assert message.startswith("broken.json: invalid JSON at line 3, column 23")
    assert "Expecting ','" in message


def test_malformed_jsonl_names_line_and_row(tmp_path: Path) -> None:
    text = '{"text": "a"}\n\n{"text": "b"}\n{"text": "c",}\n{"text": "d"}\n'
    with pytest.raises(DatasetError) as info:
        read_files([write(tmp_path, "broken.jsonl", text)])
    assert "broken.jsonl: invalid JSON at line 4 (row 3), column 14" in str(info.value)


def test_jsonl_line_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"line 2 \(row 2\) is a list, not a JSON object"):
        read_files([write(tmp_path, "list.jsonl", '{"text": "a"}\n["b"]\n')])


def test_json_scalar(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="s.json: holds a number: expected a JSON array of objects"):
        read_files([write(tmp_path, "s.json", "5")])


@pytest.mark.parametrize("name", ["mixed.json", "mixed.jsonl"])
@pytest.mark.parametrize("bad,kind", [(["q"], "a list"), ({"a": 1}, "an object")])
def test_mixed_types_in_a_column(tmp_path: Path, name: str, bad, kind: str) -> None:
    rows = [{"instruction": "i", "output": "x"}] * 6 + [{"instruction": "i", "output": bad}]
    text = json.dumps(rows) if name.endswith(".json") else jsonl(rows)
    with pytest.raises(DatasetError) as info:
        read_files([write(tmp_path, name, text)])
    assert str(info.value).startswith(f"{name}: column 'output' is text in row 1 but {kind} in row 7")


@pytest.mark.parametrize("name", ["mixed.json", "mixed.jsonl"])
def test_numbers_beside_text_are_read(tmp_path: Path, name: str) -> None:
    """Text, numbers and true/false may share a column: ``formats`` turns them into text."""
    rows = [{"instruction": "i", "output": "x"}] * 6 + [{"instruction": "i", "output": 7}]
    text = json.dumps(rows) if name.endswith(".json") else jsonl(rows)
    assert read_file(write(tmp_path, name, text))["output"][-2:] == ["x", 7]


def test_missing_values_are_not_mixed_types(tmp_path: Path) -> None:
    rows = [{"instruction": "i", "output": "x"}, {"instruction": "i"}, {"instruction": "i", "output": None}]
    assert read_file(write(tmp_path, "gaps.jsonl", jsonl(rows)))["output"] == ["x", None, None]


def test_mixed_type_problem_when_datasets_refuses(tmp_path: Path, monkeypatch) -> None:
    """Should ``datasets`` raise on mixed types instead of keeping them, the diagnostic still names them."""
    path = write(tmp_path, "m.jsonl", jsonl([{"a": "x"}, {"a": [1]}]))

    def refuse(*args, **kwargs):
        raise ValueError("JSON parse error: Column(/a) changed from string to array in row 1")

    monkeypatch.setattr(datafiles.datasets, "load_dataset", refuse)
    with pytest.raises(DatasetError, match=r"m.jsonl: column 'a' is text in row 1 but a list in row 2"):
        read_file(path)


def test_files_with_different_columns(tmp_path: Path, datasets_dir: Path) -> None:
    other = write(tmp_path, "qa.csv", "question,answer\nq,a\n")
    with pytest.raises(DatasetError) as info:
        read_files([str(datasets_dir / "identity.json"), other])
    message = str(info.value)
    assert "identity.json" in message and "qa.csv" in message and "['question', 'answer']" in message


# --- head (preview) ---


def test_read_head_each_type(tmp_path: Path, datasets_dir: Path) -> None:
    assert read_head(str(datasets_dir / "identity.json"), 2) == [
        {
            "instruction": "hi",
            "input": "",
            "output": "Hello! I am {{name}}, an AI assistant developed by {{author}}. How can I assist you today?",
        },
        {
            "instruction": "hello",
            "input": "",
            "output": "Hello! I am {{name}}, an AI assistant developed by {{author}}. How can I assist you today?",
        },
    ]
    assert len(read_head(str(datasets_dir / "c4_demo.jsonl"), 3)) == 3
    assert read_head(write(tmp_path, "a.csv", "q,a\nx,1\ny,\n"), 5) == [{"q": "x", "a": "1"}, {"q": "y", "a": None}]
    assert read_head(write(tmp_path, "a.txt", "\none\ntwo\n"), 1) == [{"text": "one"}]
    pd.DataFrame({"text": ["p", "q", "r"]}).to_parquet(tmp_path / "a.parquet")
    assert read_head(str(tmp_path / "a.parquet"), 2) == [{"text": "p"}, {"text": "q"}]


def test_read_head_bad_file_gets_the_full_diagnosis(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="line 2, column 1"):
        read_head(write(tmp_path, "b.json", '[{"text": "a"}\n{"text": "b"}]'), 5)
    with pytest.raises(DatasetError, match="column 'text' is text in row 1 but an object in row 2"):
        read_head(write(tmp_path, "m.jsonl", jsonl([{"text": "a"}, {"text": {"b": 2}}])), 5)


# --- Hub ---


def test_hub_unreachable_fails_fast(monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    started = time.monotonic()
    try:
        read_hub("tatsu-lab/alpaca", None, "train", "hf_secret_token_123")
    except DatasetError as exc:
        assert "the Hugging Face Hub could not be reached" in str(exc)
        assert "hf_secret_token_123" not in str(exc)
    else:  # pragma: no cover - only with internet access
        pytest.skip("the Hub is reachable here")
    assert time.monotonic() - started < 10


def test_hub_unreachable_message(monkeypatch) -> None:
    import trainer_core.models.hub

    monkeypatch.setattr(trainer_core.models.hub, "hub_reachable", lambda timeout_s=3.0: False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    with pytest.raises(DatasetError, match=r"dataset org/data: the Hugging Face Hub could not be reached"):
        read_hub("org/data", "sub", "train", None)
