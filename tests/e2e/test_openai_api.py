"""The OpenAI-compatible API (``/v1``) over raw HTTP and through the real ``openai`` client, on the
whole app (login + token on) with a fake engine."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from tests.e2e.conftest import TOKEN, wait_for
from tests.support.chat_server import CHECKPOINT, JOB, OTHER_JOB, chat_body, sse_data
from trainer_core.tools.render import call_text

SECRET = "sk-SecretThatMustNeverEcho-42"


def error_of(response: httpx.Response) -> dict:
    """The ``error`` object of an OpenAI-shaped error answer (and nothing else in the body)."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


# ----- models -----
def test_models_list_in_openai_shape(chat_studio):
    listed = chat_studio.api().get("/v1/models")
    assert listed.status_code == 200
    body = listed.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["base", JOB, CHECKPOINT, OTHER_JOB]
    for model in body["data"]:
        assert set(model) == {"id", "object", "created", "owned_by", "serves"}  # serves: our extra
        assert (
            model["object"] == "model" and model["owned_by"] == "finetune-studio" and isinstance(model["created"], int)
        )
        assert model["serves"] == "chat"
    one = chat_studio.api().get(f"/v1/models/{CHECKPOINT}")
    assert one.status_code == 200 and one.json()["id"] == CHECKPOINT
    missing = chat_studio.api().get("/v1/models/job_nope")
    assert missing.status_code == 404 and error_of(missing)["code"] == "model_not_found"


def test_the_api_token_is_required(chat_studio):
    for client in (chat_studio.plain(), chat_studio.api("wrong-token-0123456789"), chat_studio.api(TOKEN + "x")):
        for answer in (client.get("/v1/models"), client.post("/v1/chat/completions", json=chat_body())):
            assert answer.status_code == 401
            error = error_of(answer)
            assert error["code"] == "invalid_api_key" and "token" in error["message"] and TOKEN not in answer.text
    assert chat_studio.engine.calls == []


# ----- non-streamed answers -----
def test_chat_completion_shape_and_settings(chat_studio):
    body = chat_body(
        "tell me a story",
        max_tokens=50,
        temperature=0.2,
        top_p=0.5,
        top_k=7,
        repetition_penalty=1.1,
        seed=3,
        user="someone",
        frequency_penalty=0,
        logit_bias={},
        response_format={"type": "text"},
    )
    answer = chat_studio.api().post("/v1/chat/completions", json=body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["object"] == "chat.completion" and data["id"].startswith("chatcmpl-") and data["model"] == JOB
    assert isinstance(data["created"], int)
    (choice,) = data["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": "echo: tell me a story"}
    assert data["usage"] == {"prompt_tokens": 15, "completion_tokens": 5, "total_tokens": 20}
    model_id, messages, settings = chat_studio.engine.calls[-1]
    assert model_id == JOB and [(m.role, m.content) for m in messages] == [("user", "tell me a story")]
    assert (
        settings.max_new_tokens,
        settings.temperature,
        settings.top_p,
        settings.top_k,
        settings.repetition_penalty,
        settings.seed,
    ) == (50, 0.2, 0.5, 7, 1.1, 3)


def test_max_completion_tokens_wins_and_length_is_reported(chat_studio):
    answer = chat_studio.api().post(
        "/v1/chat/completions", json=chat_body("one two three four", max_tokens=100, max_completion_tokens=2)
    )
    data = answer.json()
    assert data["choices"][0]["finish_reason"] == "length" and data["choices"][0]["message"]["content"] == "echo: one"
    assert chat_studio.engine.calls[-1][2].max_new_tokens == 2
    defaults = chat_studio.api().post("/v1/chat/completions", json=chat_body())
    assert defaults.status_code == 200 and chat_studio.engine.calls[-1][2].max_new_tokens == 256  # GenerationSettings'


def test_roles_and_text_parts(chat_studio):
    messages = [
        {"role": "developer", "content": "be brief"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}],
            "name": "ada",
        },
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    answer = chat_studio.api().post("/v1/chat/completions", json={"model": OTHER_JOB, "messages": messages})
    assert answer.status_code == 200, answer.text
    sent = [(m.role, m.content) for m in chat_studio.engine.calls[-1][1]]
    assert sent == [("system", "be brief"), ("user", "hi there"), ("assistant", "hello"), ("user", "again")]


@pytest.mark.parametrize(
    "change, param, words",
    [
        ({"messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]}, "messages[0].tool_call_id", "no call"),
        ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role", "system, user, assistant or tool"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]},
            "messages[0].content[0].image_url",
            "does not fetch remote image URLs",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_data": "x"}}]}]},
            "messages[0].content[0]",
            "only text parts",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "input_audio", "input_audio": {"data": "x", "format": "exe"}}],
                    }
                ]
            },
            "messages[0].content[0].input_audio",
            "input_audio format 'exe' is not one read here",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "/etc/passwd"}}]}]},
            "messages[0].content[0].image_url",
            "give a data:image/",
        ),
        ({"messages": [{"role": "assistant", "content": None}]}, "messages[0].content", "text content is required"),
        ({"messages": []}, "messages", "at least 1"),
        ({"messages": "hello"}, "messages", "valid list"),
        ({"messages": [{"role": "user", "content": "x" * 100_001}]}, "messages[0].content", "at most 100000"),
        ({"n": 2}, "n", "only n=1"),
        ({"stop": ["\n"]}, "stop", "not supported"),
        ({"temperature": 5}, "temperature", "less than or equal to 2"),
        ({"top_p": 0}, "top_p", "greater than 0"),
        ({"max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
        ({"max_completion_tokens": 10**6}, "max_completion_tokens", "less than or equal to 4096"),
        ({"seed": -1}, "seed", "greater than or equal to 0"),
        ({"temperature": SECRET}, "temperature", "valid number"),
        ({"model": None}, "model", "required"),
        ({"stream": {"token": SECRET}}, "stream", "valid boolean"),
    ],
)
def test_bad_requests_are_400_in_openai_shape(chat_studio, change, param, words):
    answer = chat_studio.api().post("/v1/chat/completions", json=chat_body(**{"password": SECRET}) | change)
    assert answer.status_code == 400, answer.text
    error = error_of(answer)
    assert error["type"] == "invalid_request_error" and error["param"] == param and words in error["message"], error
    assert SECRET not in answer.text and len(answer.text) < 1000
    assert chat_studio.engine.calls == []


def test_unparseable_bodies_are_400_not_422(chat_studio):
    client = chat_studio.api()
    for raw in (
        '{"model": "x", "messages": [',
        "[1, 2]",
        f'{{"model": "{JOB}", "messages": [{{"role": "user", "content": "x"}}], "temperature": NaN}}',
        "",
        SECRET,
    ):
        answer = client.post("/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, (raw, answer.text)
        assert error_of(answer)["type"] == "invalid_request_error" and SECRET not in answer.text


def test_engine_refusals(chat_studio):
    client, engine = chat_studio.api(), chat_studio.engine
    unknown = client.post("/v1/chat/completions", json=chat_body() | {"model": "job_20990101_000000_deadbeef"})
    assert unknown.status_code == 404 and error_of(unknown)["code"] == "model_not_found"
    assert error_of(unknown)["param"] == "model"
    engine.no_weights.add(OTHER_JOB)
    gone = client.post("/v1/chat/completions", json=chat_body() | {"model": OTHER_JOB})
    assert gone.status_code == 400 and "no longer exists" in error_of(gone)["message"]
    long = client.post("/v1/chat/completions", json=chat_body("y" * 20_000))
    assert long.status_code == 400 and "reads at most" in error_of(long)["message"]
    last_not_user = client.post(
        "/v1/chat/completions", json={"model": JOB, "messages": [{"role": "assistant", "content": "hi"}]}
    )
    assert last_not_user.status_code == 400


@pytest.mark.parametrize("stream", [False, True])
def test_chat_during_training_is_409_and_says_why(chat_studio, stream):
    chat_studio.engine.busy = True
    answer = chat_studio.api().post("/v1/chat/completions", json=chat_body(stream=stream))
    assert answer.status_code == 409
    error = error_of(answer)
    assert error["code"] == "training_in_progress" and "training job is running" in error["message"]
    assert answer.headers["x-should-retry"] == "false"  # OpenAI clients would retry a 409 otherwise


def test_a_crashed_worker_is_a_500_without_traceback(chat_studio):
    chat_studio.engine.crash_after = 0
    for stream in (False, True):
        answer = chat_studio.api().post("/v1/chat/completions", json=chat_body(stream=stream))
        assert answer.status_code == 500
        error = error_of(answer)
        assert error["type"] == "server_error" and "the model failed" in error["message"]
        assert "Traceback" not in answer.text and "/srv/secret" not in answer.text


# ----- streamed answers -----
def test_streaming_chunks(chat_studio):
    body = chat_body("stream this please", stream=True, stream_options={"include_usage": True})
    with chat_studio.api().stream("POST", "/v1/chat/completions", json=body) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        events = sse_data(answer)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == JOB for c in chunks)
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = [c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]]
    assert "".join(content) == "echo: stream this please" and len([c for c in content if c]) == 4
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert (
        len(finish) == 1
        and finish[0]["choices"][0]["finish_reason"] == "stop"
        and finish[0]["choices"][0]["delta"] == {}
    )
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 18,
        "completion_tokens": 4,
        "total_tokens": 22,
    }
    without = chat_studio.api().post("/v1/chat/completions", json=chat_body(stream=True))
    assert all("usage" not in c for c in sse_data(without)[:-1])


def test_a_crash_mid_stream_is_an_error_event(chat_studio):
    chat_studio.engine.crash_after = 1
    with chat_studio.api().stream("POST", "/v1/chat/completions", json=chat_body("a b c", stream=True)) as answer:
        assert answer.status_code == 200
        events = sse_data(answer)
    assert events[1]["choices"][0]["delta"] == {"content": "echo:"}
    error = events[-1]["error"]
    assert error["type"] == "server_error" and "Traceback" not in str(events) and "[DONE]" not in events


def test_a_client_that_goes_away_ends_the_generation(chat_studio):
    engine = chat_studio.engine
    engine.token_delay_s = 0.2
    words = " ".join(["word"] * 200)
    with chat_studio.api().stream("POST", "/v1/chat/completions", json=chat_body(words, stream=True)) as answer:
        lines = answer.iter_lines()
        while not next(lines).startswith("data: {"):
            pass
    wait_for(engine.closed.is_set, timeout_s=10, what="the engine's stream to be closed")
    assert not engine.finished.is_set()


# ----- the real openai client -----
def test_openai_client(chat_studio):
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN, max_retries=0)
    assert [m.id for m in client.models.list()] == ["base", JOB, CHECKPOINT, OTHER_JOB]
    assert client.models.retrieve(CHECKPOINT).id == CHECKPOINT
    reply = client.chat.completions.create(
        model=CHECKPOINT, messages=[{"role": "user", "content": "hi you"}], max_tokens=20, temperature=0
    )
    assert reply.choices[0].message.content == "echo: hi you" and reply.choices[0].finish_reason == "stop"
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens == 9
    stream = client.chat.completions.create(
        model=JOB,
        messages=[{"role": "user", "content": "streamed words"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo: streamed words"
    assert chunks[-1].usage.completion_tokens == 3


def test_openai_client_errors(chat_studio):
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN)
    hello = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.NotFoundError) as found:
        client.chat.completions.create(model="job_nope", messages=hello)
    assert found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model=JOB, messages=hello, n=3)
    assert bad.value.param == "n"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=chat_studio.url + "/v1", api_key="wrong-token-0123456789").models.list()
    chat_studio.engine.busy = True
    started = time.monotonic()
    with pytest.raises(openai.ConflictError) as busy:
        client.chat.completions.create(model=JOB, messages=hello)
    assert "training" in busy.value.message and time.monotonic() - started < 2  # not retried


# ----- tools -----
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}


def test_tool_calls_through_the_openai_client(chat_studio):
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN, max_retries=0)
    asked = [{"role": "user", "content": 'call get_weather {"city": "Paris"}'}]
    reply = client.chat.completions.create(model=JOB, messages=asked, tools=[WEATHER, TIME])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Sure."
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert chat_studio.engine.tool_requests[-1] == ([WEATHER, TIME], "auto")
    chunks = list(
        client.chat.completions.create(
            model=JOB, messages=[{"role": "user", "content": "calls 2"}], tools=[TIME], stream=True
        )
    )
    calls: dict[int, dict] = {}
    for c in chunks:
        for piece in c.choices[0].delta.tool_calls or []:
            if piece.id:  # the head of a call: index, id, type, name, arguments ""
                assert piece.type == "function" and piece.function.arguments == ""
                calls[piece.index] = {"id": piece.id, "name": piece.function.name, "arguments": ""}
            else:
                calls[piece.index]["arguments"] += piece.function.arguments
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        ("get_time", {"n": 0}),
        ("get_time", {"n": 1}),
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls" and not any(c.choices[0].delta.content for c in chunks)
    one = client.chat.completions.create(
        model=JOB, messages=[{"role": "user", "content": "calls 2"}], tools=[TIME], parallel_tool_calls=False
    )
    assert len(one.choices[0].message.tool_calls) == 1 and one.choices[0].message.content is None
    plain = client.chat.completions.create(model=JOB, messages=asked, tools=[WEATHER], tool_choice="none")
    assert plain.choices[0].finish_reason == "stop" and "<tool_call>" in plain.choices[0].message.content
    assert chat_studio.engine.tool_requests[-1] == ([WEATHER], "none")


def test_calls_and_results_reach_the_model_in_canonical_form(chat_studio):
    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    messages = [
        {"role": "user", "content": "weather and time?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_b", "content": "noon"},  # answered out of order
        {"role": "tool", "tool_call_id": "call_a", "content": [{"type": "text", "text": "rain"}]},
    ]
    answer = chat_studio.api().post("/v1/chat/completions", json=chat_body(messages=messages, tools=[WEATHER, TIME]))
    assert answer.status_code == 200, answer.text
    sent = [(m.role, m.content) for m in chat_studio.engine.calls[-1][1]]
    assert sent == [
        ("user", "weather and time?"),
        ("assistant", call_text("get_weather", {"city": "Oslo"}) + "\n" + call_text("get_time", {})),
        ("tool", "<tool_response>\nrain\n</tool_response>"),
        ("tool", "<tool_response>\nnoon\n</tool_response>"),
    ]


CALLED = [
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": "get_time", "arguments": "{}"}}],
    },
]


@pytest.mark.parametrize(
    ("change", "param", "words"),
    [
        (
            {
                "tools": [
                    TIME,
                    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": 3}}},
                ]
            },
            "tools[1].function.parameters",
            "JSON",
        ),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type", "only function tools"),
        ({"tools": [TIME, TIME]}, "tools[1].function.name", "defined twice"),
        ({"tools": "nope"}, "tools", "valid list"),
        ({"tool_choice": "required"}, "tool_choice", "tools is empty"),
        (
            {"tools": [TIME], "tool_choice": {"type": "function", "function": {"name": "get_date"}}},
            "tool_choice",
            "no function in tools is named 'get_date'",
        ),
        ({"tools": [TIME], "tool_choice": "sometimes"}, "tool_choice", '"auto", "none", "required"'),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]},
            "tools[0].function.parameters",
            "not a JSON Schema object",
        ),
        ({"response_format": {"type": "xml"}}, "response_format", "not text, json_object or json_schema"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "https://x.org/s"}}}},
            "response_format.json_schema",
            "points outside the schema",
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "strng"}}}},
            "response_format.json_schema",
            "not a valid JSON schema",
        ),
        (
            {"messages": [*CALLED, {"role": "tool", "tool_call_id": "c9", "content": "x"}]},
            "messages[2].tool_call_id",
            "no call",
        ),
        ({"messages": [*CALLED, {"role": "tool", "content": "x"}]}, "messages[2].tool_call_id", "required"),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{no"}}]},
                ]
            },
            "messages[1].tool_calls[0].function.arguments",
            "not valid JSON",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "tool_calls": [{"id": "c", "type": "code", "function": {"name": "f"}}]},
                ]
            },
            "messages[1].tool_calls[0]",
            "only function calls",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
                ]
            },
            "messages[1].tool_calls[0].id",
            "required",
        ),
    ],
)
def test_malformed_tools_and_tool_messages_are_400_naming_the_field(chat_studio, change, param, words):
    answer = chat_studio.api().post("/v1/chat/completions", json=chat_body(**change))
    assert answer.status_code == 400, answer.text
    error = error_of(answer)
    assert error["param"] == param and words in error["message"], error
    assert chat_studio.engine.calls == []


def test_forced_calls_and_json_answers_reach_the_worker_as_asked(chat_studio):
    """tool_choice required / a named function and response_format go to the engine as sent (the
    worker constrains the decoding: tests/trainer_core/serving/test_constraints.py)."""
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN, max_retries=0)
    asked = [{"role": "user", "content": "call get_time {}"}]
    named = {"type": "function", "function": {"name": "get_time"}}
    for choice in ("required", named):
        reply = client.chat.completions.create(model=JOB, messages=asked, tools=[WEATHER, TIME], tool_choice=choice)
        assert reply.choices[0].finish_reason == "tool_calls"
        assert chat_studio.engine.tool_requests[-1][1] == choice
    shape = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    client.chat.completions.create(model=JOB, messages=[{"role": "user", "content": "hi"}], response_format=shape)
    assert chat_studio.engine.tool_requests[-1] == ([], "none", shape)


# ----- text completions -----
def test_text_completions_through_the_openai_client(chat_studio):
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN, max_retries=0)
    reply = client.completions.create(model=JOB, prompt="Once upon", max_tokens=20, temperature=0, seed=5, top_p=0.5)
    assert reply.object == "text_completion" and reply.id.startswith("cmpl-") and reply.model == JOB
    assert reply.choices[0].text == "echo: Once upon" and reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens == 3 and reply.usage.prompt_tokens == len("Once upon")
    model_id, prompt, settings = chat_studio.engine.prompts[-1]
    assert (model_id, prompt, settings.max_new_tokens, settings.temperature, settings.seed, settings.top_p) == (
        JOB,
        "Once upon",
        20,
        0,
        5,
        0.5,
    )
    short = client.completions.create(model=JOB, prompt=["a b c d"], max_tokens=2)
    assert short.choices[0].text == "echo: a" and short.choices[0].finish_reason == "length"
    chunks = list(
        client.completions.create(model=JOB, prompt="go on", stream=True, stream_options={"include_usage": True})
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "echo: go on"
    assert chunks[-2].choices[0].finish_reason == "stop" and chunks[-1].usage.completion_tokens == 3
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model=JOB, prompt=["one", "two"])
    assert bad.value.param == "prompt"
    no_prompt = chat_studio.api().post("/v1/completions", json={"model": JOB})
    assert no_prompt.status_code == 400 and error_of(no_prompt)["param"] == "prompt"
    for plain in (chat_studio.plain(), chat_studio.api("wrong-token-0123456789")):
        denied = plain.post("/v1/completions", json={"model": JOB, "prompt": "x"})
        assert denied.status_code == 401 and error_of(denied)["code"] == "invalid_api_key"
    chat_studio.engine.busy = True
    busy = chat_studio.api().post("/v1/completions", json={"model": JOB, "prompt": "x"})
    assert busy.status_code == 409
    assert len(chat_studio.engine.prompts) == 3


def test_tools_and_text_completions_through_a_share_link(chat_studio):
    made = chat_studio.api().post("/api/train/share", json={"model": CHECKPOINT})
    assert made.status_code == 201, made.text
    client = openai.OpenAI(base_url=chat_studio.url + made.json()["api_base_path"], api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model=CHECKPOINT, messages=[{"role": "user", "content": "calls 1"}], tools=[TIME]
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "get_time"
    assert client.completions.create(model=CHECKPOINT, prompt="hello").choices[0].text == "echo: hello"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model=JOB, prompt="hello")  # not the link's model
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(
            model=CHECKPOINT, messages=[{"role": "user", "content": "x"}], tools=[{"type": "x"}]
        )
    assert bad.value.param == "tools[0].type"
    forged = chat_studio.plain().post("/s/forged-token/v1/completions", json={"prompt": "x"})
    assert forged.status_code == 403


# ----- responses -----
WEATHER_FLAT = {
    "type": "function",
    "name": "get_weather",
    **{k: WEATHER["function"][k] for k in ("description", "parameters")},
}
TIME_FLAT = {
    "type": "function",
    "name": "get_time",
    "parameters": {"type": "object", "properties": {}},
    "strict": False,
}


def test_responses_through_the_openai_client(chat_studio):
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN, max_retries=0)
    reply = client.responses.create(
        model=JOB, instructions="be brief", input="tell me a story", max_output_tokens=50, temperature=0.2, store=True
    )
    assert reply.object == "response" and reply.id.startswith("resp_") and reply.status == "completed"
    assert reply.output_text == "echo: tell me a story" and reply.store is False  # nothing is stored
    (item,) = reply.output
    assert item.type == "message" and item.role == "assistant" and item.content[0].type == "output_text"
    assert reply.usage.output_tokens == 5 and reply.usage.total_tokens == reply.usage.input_tokens + 5 > 5
    model_id, messages, settings = chat_studio.engine.calls[-1]
    assert [(m.role, m.content) for m in messages] == [("system", "be brief"), ("user", "tell me a story")]
    assert (model_id, settings.max_new_tokens, settings.temperature) == (JOB, 50, 0.2)
    cut = client.responses.create(model=JOB, input="one two three four", max_output_tokens=2)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    events = list(client.responses.create(model=JOB, input=[{"role": "user", "content": "a b c"}], stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "echo: a b c"
    assert events[-1].response.output_text == "echo: a b c" and events[-1].response.usage.output_tokens == 4


def test_the_codex_style_round_trip(chat_studio):
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN, max_retries=0)
    asked = [{"role": "user", "content": [{"type": "input_text", "text": 'call get_weather {"city": "Paris"}'}]}]
    reply = client.responses.create(model=JOB, input=asked, tools=[WEATHER_FLAT, TIME_FLAT])
    message, call = reply.output
    assert message.type == "message" and message.content[0].text == "Sure."
    assert call.type == "function_call" and call.name == "get_weather" and call.status == "completed"
    assert call.call_id.startswith("call_") and json.loads(call.arguments) == {"city": "Paris"}
    assert chat_studio.engine.tool_requests[-1] == ([WEATHER, TIME], "auto")  # the chat's form
    events = list(client.responses.create(model=JOB, input="calls 2", tools=[TIME_FLAT], stream=True))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [(i.type, i.name, json.loads(i.arguments)) for i in done] == [
        ("function_call", "get_time", {"n": 0}),
        ("function_call", "get_time", {"n": 1}),
    ]
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert [e.item_id for e in deltas] == [i.id for i in done] and events[-1].response.output == done
    one = client.responses.create(model=JOB, input="calls 2", tools=[TIME_FLAT], parallel_tool_calls=False)
    assert [i.type for i in one.output] == ["function_call"] and one.parallel_tool_calls is False
    back = [
        *asked,
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "rain"},
    ]
    final = client.responses.create(model=JOB, input=back, tools=[WEATHER_FLAT, TIME_FLAT])
    assert final.status == "completed" and [i.type for i in final.output] == ["message"]
    sent = [(m.role, m.content) for m in chat_studio.engine.calls[-1][1]]
    assert sent[1:] == [
        ("assistant", call_text("get_weather", {"city": "Paris"})),
        ("tool", "<tool_response>\nrain\n</tool_response>"),
    ]


@pytest.mark.parametrize(
    ("change", "param", "words"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id", "send the whole conversation"),
        ({"tools": [TIME_FLAT, {"type": "web_search"}]}, "tools[1].type", "built-in tools"),
        (
            {"tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": 3}}]},
            "tools[0].parameters",
            "JSON",
        ),
        ({"tools": [TIME_FLAT], "tool_choice": {"type": "file_search"}}, "tool_choice", "auto, none, required"),
        ({"input": []}, "input", "at least one item"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "user, system, developer or assistant"),
        ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type", "function_call_output"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0]",
            "only text",
        ),
        ({"input": ["hi"]}, "input[0]", "give an object"),
        (
            {"input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]},
            "input[0].call_id",
            "no function_call",
        ),
        (
            {"input": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{no"}]},
            "input[0].arguments",
            "not valid JSON",
        ),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id", "required"),
        ({"input": [{"role": "user", "content": "y" * 100_001}]}, "input[0].content", "at most"),
        ({"instructions": "y" * 100_001}, "instructions", "instructions: String should have at most"),
        ({"max_output_tokens": 0}, "max_output_tokens", ""),
        ({"text": {"format": {"type": "xml"}}}, "text.format", "text.format: type 'xml' is not text, json_object"),
        ({"text": {"format": "json"}}, "text.format", "give {"),
        (
            {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "strng"}}}},
            "text.format.schema",
            "text.format.schema: not a valid JSON schema",
        ),
    ],
)
def test_malformed_responses_requests_are_400_naming_the_field(chat_studio, change, param, words):
    answer = chat_studio.api().post("/v1/responses", json={"model": JOB, "input": "hi"} | change)
    assert answer.status_code == 400, answer.text
    error = error_of(answer)
    assert error["param"] == param and words in error["message"], error
    assert chat_studio.engine.calls == []


def test_text_format_json_reaches_the_worker_as_response_format(chat_studio):
    """``text.format`` json_schema / json_object go to the engine as the chat's ``response_format``
    (the worker constrains the decoding: tests/trainer_core/serving/test_constraints.py), and the
    response echoes the format."""
    client = openai.OpenAI(base_url=chat_studio.url + "/v1", api_key=TOKEN, max_retries=0)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    flat = {"type": "json_schema", "name": "place", "schema": schema, "strict": True}
    reply = client.responses.create(model=JOB, input="where?", text={"format": flat})
    assert reply.status == "completed" and reply.text.format.type == "json_schema" and reply.text.format.name == "place"
    shape = {"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}}
    assert chat_studio.engine.tool_requests[-1] == ([], "none", shape)
    client.responses.create(model=JOB, input="any JSON", text={"format": {"type": "json_object"}})
    assert chat_studio.engine.tool_requests[-1] == ([], "none", {"type": "json_object"})
    plain = client.responses.create(model=JOB, input="words", text={"format": {"type": "text"}})
    assert chat_studio.engine.tool_requests[-1] == ([], "none") and plain.text.format.type == "text"


def test_responses_token_and_share_link(chat_studio):
    for plain in (chat_studio.plain(), chat_studio.api("wrong-token-0123456789")):
        denied = plain.post("/v1/responses", json={"model": JOB, "input": "x"})
        assert denied.status_code == 401 and error_of(denied)["code"] == "invalid_api_key"
    made = chat_studio.api().post("/api/train/share", json={"model": CHECKPOINT})
    client = openai.OpenAI(base_url=chat_studio.url + made.json()["api_base_path"], api_key="unused", max_retries=0)
    reply = client.responses.create(model=CHECKPOINT, input="calls 1", tools=[TIME_FLAT])
    assert reply.output[0].type == "function_call" and reply.output[0].name == "get_time"
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model=JOB, input="hello")  # not the link's model
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model=CHECKPOINT, input="x", tools=[{"type": "code_interpreter"}])
    assert bad.value.param == "tools[0].type"
    assert chat_studio.engine.calls[-1][0] == CHECKPOINT and len(chat_studio.engine.calls) == 1


def test_responses_events_validate_against_the_openai_types(chat_studio):
    """The client builds its objects without validating; the ``openai`` package's own types, validated."""
    from openai.types.responses import Response, ResponseStreamEvent
    from pydantic import TypeAdapter

    events = TypeAdapter(ResponseStreamEvent)
    for body in (
        {"input": "a b"},
        {"input": "call get_time {}", "tools": [TIME_FLAT]},
        {"input": "a b c", "max_output_tokens": 1},
    ):
        Response.model_validate(chat_studio.api().post("/v1/responses", json={"model": JOB} | body).json())
        with chat_studio.api().stream("POST", "/v1/responses", json={"model": JOB, "stream": True} | body) as answer:
            kinds = [events.validate_python(data).type for data in sse_data(answer)]
        assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.incomplete")


def test_responses_refusals_and_failures_keep_their_status(chat_studio):
    from openai.types.responses import ResponseErrorEvent

    chat_studio.engine.busy = True
    for stream in (False, True):
        busy = chat_studio.api().post("/v1/responses", json={"model": JOB, "input": "x", "stream": stream})
        assert busy.status_code == 409 and error_of(busy)["code"] == "training_in_progress"
    chat_studio.engine.busy, chat_studio.engine.crash_after = False, 1
    body = {"model": JOB, "input": "a b c", "stream": True}
    with chat_studio.api().stream("POST", "/v1/responses", json=body) as answer:
        assert answer.status_code == 200
        events = sse_data(answer)
    assert [e["type"] for e in events][-2:] == ["response.output_text.delta", "error"]
    failed = ResponseErrorEvent.model_validate(events[-1])
    assert failed.sequence_number == len(events) - 1 and "Traceback" not in str(events)
