"""The check's tools line: rows with functions, calls per row, results, and how the template renders them."""

from __future__ import annotations

import json

import datasets
import pytest

from tests.support.chat_templates import with_template
from trainer_core.data.errors import DatasetError
from trainer_core.data.formats import normalize
from trainer_core.preflight.gather import Gathered
from trainer_core.preflight.token_issues import template_shaping, tools_line
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType

WEATHER = {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def sharegpt(*turns: tuple[str, str], tools: str = "") -> dict:
    return {"conversations": [{"from": who, "value": text} for who, text in turns], "tools": tools}


def test_the_line_counts_tools_calls_and_results_and_names_the_rendering(tokenizer) -> None:
    with_call = sharegpt(
        ("human", "Weather?"),
        ("function_call", CALL),
        ("observation", '{"temp": 21}'),
        ("function_call", CALL),
        ("observation", '{"temp": 22}'),
        ("gpt", "21 C"),
        tools=json.dumps([WEATHER]),
    )
    plain = sharegpt(("human", "hi"), ("gpt", "yo"))
    rows = [with_call, plain, plain, plain]
    table = datasets.Dataset.from_dict({key: [row[key] for row in rows] for key in ("conversations", "tools")})
    found = Gathered(sources=[], train=normalize(table, FormatType.sharegpt, "t.json"), eval=None)
    request = TrainingStartRequest.model_construct(model_name="tiny")
    line = tools_line(found, tokenizer, request)
    assert line.startswith(
        "Tools: 1 of 4 rows define functions (1 functions: get_weather); 1 rows call them, 2 calls in all "
        "(0.50 per row, at most 2 in one), answered by 2 tool results, which are never trained. "
    ), line
    assert line.endswith(
        "does not render tools: the functions go in the system message as JSON in <tools> (the "
        "fallback block) and calls are trained as <tool_call> blocks"
    )
    native = tools_line(found, with_template(tokenizer, "qwen2.5"), request)
    assert native.endswith("The chat template of tiny renders the tools and calls natively")
    none = Gathered(sources=[], train=normalize(table.select([1, 2]), FormatType.sharegpt, "t.json"), eval=None)
    assert tools_line(none, tokenizer, request) is None
    shaping = template_shaping(found, with_template(tokenizer, "gemma2"), request)  # no tools: results are user turns
    assert "has no tool role: the tool results of 1 rows are user turns" in shaping.message
    assert template_shaping(found, with_template(tokenizer, "mistral-nemo"), request) is None  # native: tool messages


def test_a_start_after_its_check_reads_no_row_when_the_tokens_are_cached(tmp_path, tiny_model_dir, monkeypatch):
    """Start's admission (``start_issues``) on a token cache hit trusts the cached counts (the key
    holds the file's content hash) and reads no row; a changed file is read and checked again."""
    from trainer_core.preflight import check
    from trainer_core.settings import Settings, get_settings

    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("STUDIO_TOKEN_CACHE_MB", "64")
    get_settings.cache_clear()
    data = tmp_path / "chat.jsonl"
    row = {"instruction": "Say hi.", "output": "hi"}
    data.write_text("".join(json.dumps(row) + "\n" for _ in range(20)))
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=f"{tmp_path}:{tiny_model_dir.parent}")
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir), local_datasets=[str(data)], val_size=0.2, max_seq_length=64
    )
    assert check.start_issues(request, settings) == []  # a miss: read, tokenized and stored (both splits)
    read, gather = [], check.gather
    monkeypatch.setattr(check, "gather", lambda *args, **kwargs: read.append(1) or gather(*args, **kwargs))
    assert check.start_issues(request, settings) == [] and read == []
    data.write_text(json.dumps({"instruction": "Say hi.", "output": ""}) + "\n")  # another file: read again
    with pytest.raises(DatasetError, match="row 1: field 'output' is empty"):
        check.start_issues(request, settings)
    assert read == [1]
    get_settings.cache_clear()


def test_rows_without_tools_are_told_apart_in_arrow() -> None:
    from trainer_core.preflight.token_issues import may_use_tools

    def table(last: dict, tools):
        rows = {"messages": [[{"role": "user", "content": "hi"}, last]], "tools": [tools]}
        return datasets.Dataset.from_dict(rows).data

    answer = {"role": "assistant", "content": "yo"}
    assert not may_use_tools(table(answer, "")) and not may_use_tools(table(answer, None))
    assert may_use_tools(table({"role": "assistant", "content": "<tool_call>{}"}, ""))
    assert may_use_tools(table({"role": "tool", "content": None}, None))
    assert may_use_tools(table(answer, json.dumps([WEATHER])))
