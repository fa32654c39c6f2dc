"""Training rows with tools: every shape read into canonical rows (tools beside the messages), bad
calls and results refused by file, row and field, calls trained and results never (decoded), the
check's tools line and the run's record of how the tools were rendered."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import datasets
import pytest

from tests.support.chat_templates import with_template
from trainer_core.data.files import DatasetError, read_file
from trainer_core.data.formats import normalize
from trainer_core.data.tokenization import IGNORE, tokenize_dataset
from trainer_core.data.tool_rows import FALLBACK, NATIVE, conversation, tool_counts, trained_tool_format
from trainer_core.vocabulary import FormatType

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
GLAIVE_CALL_ROWS = [0, 3, 7]  # rows of glaive_toolcall_en_demo.json with 1, 3 and 2 calls, each answered


def rows(*items: dict) -> datasets.Dataset:
    keys = list(dict.fromkeys(key for item in items for key in item))
    return datasets.Dataset.from_dict({key: [item.get(key) for item in items] for key in keys})


def openai_row(arguments: object, tools: object = (WEATHER,), call_id: str = "call_1") -> dict:
    """An OpenAI chat row: a call (content null) with ``arguments``, the result answering ``call_id``."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    return {
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": '{"temp": 21}'},
            {"role": "assistant", "content": "21 C."},
        ],
        "tools": json.dumps(list(tools)) if isinstance(tools, tuple) else tools,
    }


def test_openai_rows_become_canonical_calls_and_results_with_their_tools() -> None:
    data = normalize(rows(openai_row('{"city": "Paris"}')), FormatType.messages, "o")
    as_object = normalize(rows(openai_row({"city": "Paris"})), FormatType.messages, "o")
    assert data.column_names == ["messages", "tools"]
    first = data[0]
    assert first == as_object[0]  # arguments as JSON text or as an object
    assert first["messages"][1] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    }
    assert first["messages"][2] == {"role": "tool", "content": '<tool_response>\n{"temp": 21}\n</tool_response>'}
    assert json.loads(first["tools"]) == [{"type": "function", "function": WEATHER}]
    listed = normalize(rows({**openai_row("{}"), "tools": [WEATHER]}), FormatType.messages, "o")  # a list column
    assert listed[0]["tools"] == first["tools"]


def two_calls_answered(*ids: str) -> dict:
    """An OpenAI row with two parallel calls answered by results with ``ids``, in that order."""
    row = openai_row("{}")
    call = row["messages"][1]["tool_calls"][0]
    row["messages"][1]["tool_calls"] = [{**call, "id": "call_1"}, {**call, "id": "call_2"}]
    results = [{"role": "tool", "tool_call_id": i, "content": "r"} for i in ids]
    row["messages"] = [*row["messages"][:2], *results, row["messages"][3]]
    return row


@pytest.mark.parametrize(
    "row,expected",
    [
        (openai_row("{oops"), "turn 2 (assistant), tool_calls[0].function.arguments: not valid JSON"),
        (openai_row("{}", call_id="call_9"), "'messages' turn 3 answers tool_call_id 'call_9', which no earlier call"),
        (openai_row("{}", tools=({**WEATHER, "name": "get_time"},)), "turn 2 calls 'get_weather', which the row's"),
        (two_calls_answered("call_2", "call_1"), "'messages' turn 3 answers call 'call_2' before call 'call_1'"),
        (openai_row("{}", tools='[{"name": "has space"}]'), "field tools[0].name: 'has space' is not a function name"),
        (
            {"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": "{oops"}]},
            "'conversations' turn 2, call 1: not valid JSON",
        ),
        (
            {
                "conversations": [
                    {"from": "human", "value": "q"},
                    {"from": "observation", "value": "r"},
                    *[{"from": "gpt", "value": "a"}],
                ]
            },
            "'conversations' turn 2 is a tool result that answers no call",
        ),
    ],
)
def test_bad_calls_and_results_are_refused_by_file_row_and_field(row: dict, expected: str) -> None:
    good = (
        openai_row("{}")
        if "messages" in row
        else {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}
    )
    fmt = FormatType.messages if "messages" in row else FormatType.sharegpt
    with pytest.raises(DatasetError) as caught:
        normalize(rows(good, row), fmt, "tools.json")
    assert str(caught.value).startswith("tools.json, row 2: ") and expected in str(caught.value), str(caught.value)


@pytest.fixture(scope="module")
def glaive(datasets_dir: Path) -> datasets.Dataset:
    name = "glaive_toolcall_en_demo.json"
    return normalize(read_file(str(datasets_dir / name)), FormatType.sharegpt, name).select(GLAIVE_CALL_ROWS)


def trained_and_masked(tokenizer, rows: datasets.Dataset) -> list[tuple[str, str]]:
    """(the decoded trained tokens, the decoded untrained ones) of each row."""
    encoded, _ = tokenize_dataset(rows, tokenizer, 8192, train_on_completions=True)
    out = []
    for ids, labels in zip(encoded["input_ids"], encoded["labels"]):
        trained = [t for t, label in zip(ids, labels) if label != IGNORE]
        out.append(
            (tokenizer.decode(trained), tokenizer.decode([t for t, label in zip(ids, labels) if label == IGNORE]))
        )
    return out


@pytest.mark.parametrize("template", [None, "qwen2.5", "hermes3", "llama3.1", "gemma2"])
def test_calls_are_trained_and_results_never(tokenizer, glaive: datasets.Dataset, template) -> None:
    """The bundled ChatML (fallback block) and real templates, native (Qwen 2.5, Hermes 3, Llama 3.1)
    or not (Gemma 2): each call's name and arguments are in the trained tokens, no result is."""
    model = tokenizer if template is None else with_template(tokenizer, template)
    for (trained, masked), row in zip(trained_and_masked(model, glaive), glaive):
        calls = [m["content"] for m in row["messages"] if m["role"] == "assistant" and "<tool_call>" in m["content"]]
        results = [m["content"] for m in row["messages"] if m["role"] == "tool"]
        assert calls and len(calls) == len(results)
        for call in calls:
            body = json.loads(call.split("\n")[1])
            assert f'"{body["name"]}"' in trained and json.dumps(body["arguments"]) in trained
        for result in results:  # as written, or as a JSON string (Llama 3.1 writes it so)
            text = result.split("\n")[1]
            assert text not in trained and json.dumps(text)[1:-1] not in trained
            assert text in masked or json.dumps(text)[1:-1] in masked


@pytest.mark.parametrize("template", ["mistral-nemo", "gpt-oss"])
def test_templates_whose_turns_cannot_be_located_refuse_clearly(tokenizer, glaive: datasets.Dataset, template) -> None:
    with pytest.raises(
        DatasetError, match="row 1: .* so the assistant turns cannot be located; set train_on_completions"
    ):
        tokenize_dataset(glaive, with_template(tokenizer, template), 8192, train_on_completions=True)


def test_counts_and_the_recorded_format(tokenizer, glaive: datasets.Dataset) -> None:
    counts = tool_counts(glaive["messages"], glaive["tools"])
    assert (counts.rows, counts.with_tools, counts.with_calls, counts.calls, counts.most_calls, counts.results) == (
        3,
        3,
        3,
        6,
        3,
        6,
    )
    defined = {tool["function"]["name"] for text in glaive["tools"] for tool in json.loads(text)}
    assert counts.functions == tuple(sorted(defined)) and len(defined) == 4
    assert trained_tool_format(glaive, tokenizer) == FALLBACK
    assert trained_tool_format(glaive, with_template(tokenizer, "qwen2.5")) == NATIVE
    plain = rows({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})
    assert trained_tool_format(normalize(plain, FormatType.messages, "p"), tokenizer) is None


def test_a_run_records_the_format_and_evaluation_rows_keep_their_tools(tokenizer, datasets_dir: Path) -> None:
    from trainer_core.data.prepare import load_conversations
    from trainer_core.data.prepared import prepare_data
    from trainer_core.evaluation.rows import to_rows
    from trainer_core.evaluation.worker import _fitting
    from trainer_core.schemas import TrainingStartRequest

    glaive = str(datasets_dir / "glaive_toolcall_en_demo.json")
    request = TrainingStartRequest(local_datasets=[glaive], dataset_slice_end=2)
    assert prepare_data(request, tokenizer).tool_format == FALLBACK  # run.json's tool_format
    canonical, _ = load_conversations(request)
    eval_rows, _ = to_rows(canonical, "glaive")
    assert {row.index for row in eval_rows} == {0, 1} and eval_rows[0].tools  # a row with tools: each assistant turn
    assert [row.tools for row in eval_rows] == [canonical["tools"][row.index] for row in eval_rows]
    kept, prompts, _ = _fitting(eval_rows, SimpleNamespace(tokenizer=tokenizer, context_tokens=8192), 16, None)
    prompt = tokenizer.decode(prompts[0])  # generation sees the tools as training did: here the fallback block
    assert prompt.startswith("<|im_start|>system\nYou have access to the following tools:\n<tools>\n{")
    assert prompt.endswith("<|im_start|>assistant\n") and len(kept) == len(eval_rows)


def test_glaive_rows_on_chatml_read_as_before(tokenizer, datasets_dir: Path) -> None:
    """SmolLM2's ChatML renders no tools: the fallback block, which is the system message these rows
    had when the tools were merged as they were read (the raw functions as JSON lines), byte for byte."""
    path = datasets_dir / "glaive_toolcall_en_demo.json"
    raw = json.loads(path.read_text(encoding="utf-8"))[:20]
    data = normalize(read_file(str(path)), FormatType.sharegpt, path.name).select(range(20))
    encoded, _ = tokenize_dataset(data, tokenizer, 8192, train_on_completions=True)
    for ids, row, messages in zip(encoded["input_ids"], raw, data["messages"]):
        tools = json.loads(row["tools"] or "[]")
        block = "You have access to the following tools:\n<tools>\n" + "\n".join(json.dumps(t) for t in tools)
        before = [{"role": "system", "content": block + "\n</tools>"}] if tools else []
        assert tokenizer.decode(ids) == tokenizer.apply_chat_template([*before, *messages], tokenize=False)


def test_parallel_results_keep_their_call_ids_where_turns_must_alternate(tokenizer) -> None:
    """Mistral Nemo's template merges repeated turns (``template_fit``) but never two results, which
    carry the ids of the calls they answer."""
    model = with_template(tokenizer, "mistral-nemo")
    data = normalize(rows(two_calls_answered("call_1", "call_2")), FormatType.messages, "p")
    messages, extra = conversation(model, data[0]["messages"], data[0]["tools"])
    results = [m for m in messages if m["role"] == "tool"]
    assert len(results) == 2 and len({m["tool_call_id"] for m in results}) == 2 and extra["tools"]
    encoded, _ = tokenize_dataset(data, model, 8192, train_on_completions=False)
    assert tokenizer.decode(encoded[0]["input_ids"]).count("[TOOL_RESULTS]") == 2
