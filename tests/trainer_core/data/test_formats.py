"""Layout detection, column mapping and normalisation to ``messages`` / ``text``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import datasets
import pytest

from trainer_core.data.files import DatasetError, read_file
from trainer_core.data.formats import apply_mapping, detect_format, message_lines, normalize
from trainer_core.vocabulary import FormatType


def rows(*items: dict) -> datasets.Dataset:
    """A dataset with the union of the rows' keys (``Dataset.from_list`` keeps only the first row's)."""
    keys = list(dict.fromkeys(key for item in items for key in item))
    return datasets.Dataset.from_dict({key: [item.get(key) for item in items] for key in keys})


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


# --- detection ---


@pytest.mark.parametrize(
    "columns,expected",
    [
        (["conversations", "tools"], FormatType.sharegpt),
        (["messages"], FormatType.messages),
        (["instruction", "input", "output"], FormatType.alpaca),
        (["prompt", "completion", "id"], FormatType.prompt_completion),
        (["text", "url"], FormatType.text),
    ],
)
def test_detect_format(columns: list[str], expected: FormatType) -> None:
    assert detect_format(columns, "f.json") == expected


def test_detect_preference_pairs() -> None:
    with pytest.raises(
        DatasetError, match=r"dpo.json holds preference pairs .*not supported for supervised fine-tuning"
    ):
        detect_format(["conversations", "chosen", "rejected"], "dpo.json")


def test_detect_unknown_columns() -> None:
    with pytest.raises(DatasetError) as info:
        detect_format(["question", "answer"], "qa.csv")
    message = str(info.value)
    assert "qa.csv has columns ['question', 'answer']" in message
    assert "instruction + output (Alpaca)" in message and "conversations (ShareGPT)" in message
    assert "custom_format_mapping" in message


# --- the shared files ---


def test_alpaca_file(datasets_dir: Path) -> None:
    raw = read_file(str(datasets_dir / "alpaca_en_demo.json"))
    assert detect_format(raw.column_names, "alpaca") == FormatType.alpaca
    started = time.perf_counter()
    data = normalize(raw, FormatType.alpaca, "alpaca_en_demo.json")
    assert time.perf_counter() - started < 2.0
    assert data.column_names == ["messages", "tools"] and len(data) == 999 and set(data["tools"]) == {""}
    first = raw[0]
    assert data[0]["messages"] == [user(first["instruction"]), assistant(first["output"])]
    with_input = next(i for i, row in enumerate(raw) if row["input"])
    row = raw[with_input]
    assert data[with_input]["messages"][0] == user(row["instruction"] + "\n\n" + row["input"])


def test_identity_file(datasets_dir: Path) -> None:
    raw = read_file(str(datasets_dir / "identity.json"))
    data = normalize(raw, detect_format(raw.column_names, "identity.json"), "identity.json")
    assert len(data) == 91
    assert data[2]["messages"] == [
        user("Who are you?"),
        assistant("I am {{name}}, an AI assistant developed by {{author}}. How can I assist you today?"),
    ]


def test_glaive_file(datasets_dir: Path) -> None:
    raw = read_file(str(datasets_dir / "glaive_toolcall_en_demo.json"))
    assert detect_format(raw.column_names, "glaive") == FormatType.sharegpt
    data = normalize(raw, FormatType.sharegpt, "glaive_toolcall_en_demo.json")
    assert len(data) == 300
    messages = data[0]["messages"]
    tools = json.loads(raw[0]["tools"])  # bare functions: beside the messages in OpenAI's form, not in a system turn
    assert json.loads(data[0]["tools"]) == [{"type": "function", "function": tools[0]}]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    call = raw[0]["conversations"][3]["value"]
    assert messages[3] == assistant(f"<tool_call>\n{call}\n</tool_call>")
    result = raw[0]["conversations"][4]["value"]
    assert messages[4] == {"role": "tool", "content": f"<tool_response>\n{result}\n</tool_response>"}
    no_tools = next(i for i, row in enumerate(raw) if row["tools"] in ("", "[]"))
    assert data[no_tools]["tools"] == "" and data[no_tools]["messages"][0]["role"] == "user"


def test_c4_file(datasets_dir: Path) -> None:
    raw = read_file(str(datasets_dir / "c4_demo.jsonl"))
    data = normalize(raw, detect_format(raw.column_names, "c4"), "c4_demo.jsonl")
    assert data.column_names == ["text"] and len(data) == 300
    assert data[5]["text"] == raw[5]["text"]


def test_dpo_file(datasets_dir: Path) -> None:
    raw = read_file(str(datasets_dir / "dpo_en_demo.json"))
    with pytest.raises(DatasetError, match="dpo_en_demo.json holds preference pairs"):
        normalize(raw, FormatType.auto, "dpo_en_demo.json")


# --- the other layouts and options ---


def test_alpaca_system_and_history() -> None:
    data = normalize(
        rows(
            {"instruction": "And 3+3?", "input": " ", "output": "6", "system": "Be brief.", "history": [["2+2?", "4"]]}
        ),
        FormatType.alpaca,
        "a.json",
    )
    assert data[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        user("2+2?"),
        assistant("4"),
        user("And 3+3?"),
        assistant("6"),
    ]


def test_sharegpt_system_column_and_turn_and_tools() -> None:
    row = {
        "conversations": [
            {"from": "system", "value": "Turn system."},
            {"from": "human", "value": "hi"},
            {"from": "gpt", "value": "yo"},
        ],
        "system": "Column system.",
        "tools": '[{"name": "f"}]',
    }
    data = normalize(rows(row), FormatType.sharegpt, "s.json")[0]
    assert data["messages"] == [
        {"role": "system", "content": "Column system.\n\nTurn system."},
        user("hi"),
        assistant("yo"),
    ]
    assert json.loads(data["tools"]) == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    ]


def test_messages_layout_accepts_both_key_styles() -> None:
    data = normalize(
        rows(
            {"messages": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]},
            {"messages": [{"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]},
        ),
        FormatType.messages,
        "m.jsonl",
    )
    assert data["messages"] == [[user("a"), assistant("b")], [user("c"), assistant("d")]]


def test_prompt_completion() -> None:
    data = normalize(rows({"prompt": "Q", "completion": "A"}), FormatType.prompt_completion, "p.csv")
    assert data[0]["messages"] == [user("Q"), assistant("A")]


def test_already_wrapped_tool_text_is_not_wrapped_again() -> None:
    call = assistant('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    turns = [user("q"), call, {"role": "tool", "content": "<tool_response>\nx\n</tool_response>"}, assistant("a")]
    assert (
        normalize(rows({"messages": turns}), FormatType.messages, "m")[0]["messages"][2]["content"]
        == "<tool_response>\nx\n</tool_response>"
    )


def test_message_lines() -> None:
    assert message_lines([user("hi"), assistant("yo")]) == "user: hi\nassistant: yo"
    assert message_lines([user("x" * 50)], limit=10) == "user: xxx…"


# --- mapping ---


def test_mapping_renames(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("question,answer,output\nWhat?,That.,ignored\n", encoding="utf-8")
    mapped = apply_mapping(read_file(str(path)), {"instruction": "question", "output": "answer"}, "qa.csv")
    assert sorted(mapped.column_names) == ["instruction", "output"]
    assert normalize(mapped, FormatType.auto, "qa.csv")[0]["messages"] == [user("What?"), assistant("That.")]


def test_mapping_to_a_missing_column() -> None:
    with pytest.raises(DatasetError) as info:
        apply_mapping(rows({"question": "q", "answer": "a"}), {"instruction": "question", "output": "reply"}, "qa.csv")
    message = str(info.value)
    assert "'output' to column 'reply'" in message and "qa.csv has no such column" in message
    assert "['question', 'answer']" in message


# --- errors with file and row ---


def conversation(*turns: tuple[str, object]) -> dict:
    return {"conversations": [{"from": role, "value": value} for role, value in turns]}


GOOD = conversation(("human", "hi"), ("gpt", "yo"))


@pytest.mark.parametrize(
    "bad,expected",
    [
        (
            conversation(("human", "hi"), ("bot", "yo")),
            "turn 2 has unknown role 'bot'; known roles: system, human, user, gpt, assistant",
        ),
        (conversation(("human", "hi"), ("human", "again")), "'conversations' has no assistant turn"),
        ({"conversations": []}, "field 'conversations' is empty"),
        (conversation(("human", "hi"), ("gpt", "  ")), "empty assistant turn"),
        ({**GOOD, "tools": "[{oops"}, "field tools: not valid JSON"),
    ],
)
def test_sharegpt_row_errors(bad: dict, expected: str) -> None:
    with pytest.raises(DatasetError) as info:
        normalize(rows(GOOD, GOOD, bad), FormatType.sharegpt, "chat.json")
    assert str(info.value).startswith("chat.json, row 3: ")
    assert expected in str(info.value)


def test_non_text_content_from_a_file(tmp_path: Path) -> None:
    """datasets keeps a nested value that mixes types (Json feature); normalise names the row."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([GOOD, conversation(("human", "hi"), ("gpt", {"a": 42}))]), encoding="utf-8")
    with pytest.raises(
        DatasetError, match=r"chat.json, row 2: turn 2 \(gpt\) has content of type dict: content must be text"
    ):
        normalize(read_file(str(path)), FormatType.auto, "chat.json")


@pytest.mark.parametrize(
    "bad,expected",
    [
        ({"instruction": "x", "input": "", "output": ""}, "field 'output' is empty"),
        ({"instruction": "", "input": "", "output": "y"}, "field 'instruction' is empty"),
        ({"instruction": "x", "input": "", "output": None}, "field 'output' is missing"),
    ],
)
def test_alpaca_row_errors(bad: dict, expected: str) -> None:
    good = {"instruction": "x", "input": "", "output": "y"}
    with pytest.raises(DatasetError, match=rf"a.json, row 12: {expected}"):
        normalize(rows(good, bad), FormatType.alpaca, "a.json", first_row=11)


def test_empty_text_row() -> None:
    with pytest.raises(DatasetError, match=r"t.jsonl, row 2: field 'text' is empty"):
        normalize(rows({"text": "a"}, {"text": ""}), FormatType.text, "t.jsonl")


def test_forced_format_with_missing_columns() -> None:
    with pytest.raises(
        DatasetError, match=r"format alpaca needs column\(s\) \['instruction', 'output'\], but x.json has \['text'\]"
    ):
        normalize(rows({"text": "a"}), FormatType.alpaca, "x.json")


def test_rows_are_normalised_in_batches_with_their_own_row_numbers(monkeypatch) -> None:
    from trainer_core.data import formats

    monkeypatch.setattr(formats, "NORMALIZE_ROWS", 2)
    rows = [{"instruction": f"q{i}", "input": "", "output": f"a{i}"} for i in range(5)]
    canonical = normalize(datasets.Dataset.from_list(rows), FormatType.alpaca, "f.json", first_row=11)
    assert [m[-1]["content"] for m in canonical["messages"]] == [f"a{i}" for i in range(5)]
    rows[3]["output"] = ""
    with pytest.raises(DatasetError, match=r"^f\.json, row 14: "):  # in the second batch
        normalize(datasets.Dataset.from_list(rows), FormatType.alpaca, "f.json", first_row=11)
