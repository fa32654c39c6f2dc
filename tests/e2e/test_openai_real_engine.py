"""The OpenAI-compatible routes over the real ``ChatEngine`` (its inference worker replaced by
``tests.support.fake_chat_workers.echo_worker``): answers, a killed worker, worker errors, chat refused
during training, and a client that leaves mid-stream freeing the engine for the next request."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from tests.e2e.conftest import TOKEN, ServerThread, wait_for
from tests.support import fake_chat_workers, fake_workers
from tests.support.chat_server import api_app

RUN = "job_20250105_090000_3a3b3c3d"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(url, runner) of the API with a real engine and one run holding an adapter."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path_factory.mktemp("engine"), api_token=TOKEN)
    folder = settings.runs_dir / RUN
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"w")
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=RunStore(settings.db_path)
    )
    runner.store.create_run(RUN, {"model_name": "org/base"}, str(folder), "completed")
    engine = ChatEngine(runner, settings, worker_target=fake_chat_workers.echo_worker)
    with ServerThread(api_app(settings, runner, engine)) as server:
        yield server.url.rstrip("/"), runner
        engine.unload()
        runner.stop(save=False)
        runner.wait(10)


def ask(url: str, text: str, **extra) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
        json={"model": RUN, "messages": [{"role": "user", "content": text}], **extra},
    )


@pytest.mark.slow
def test_answers_through_the_openai_client(served):
    url, runner = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
    assert [m.id for m in client.models.list()] == ["base", RUN]
    reply = client.chat.completions.create(model=RUN, messages=[{"role": "user", "content": "one two"}])
    assert reply.choices[0].message.content == f"[{RUN}] one two " and reply.usage.completion_tokens == 3
    chunks = list(
        client.chat.completions.create(
            model=RUN, messages=[{"role": "user", "content": "a b c"}], stream=True, max_tokens=2
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == f"[{RUN}] a "
    assert chunks[-1].choices[0].finish_reason == "length"
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    called = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'  # the worker echoes it
    reply = client.chat.completions.create(model=RUN, messages=[{"role": "user", "content": called}], tools=[tool])
    (call,) = reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "tool_calls" and reply.choices[0].message.content == f"[{RUN}]"
    assert call.function.name == "f" and json.loads(call.function.arguments) == {"x": 1}
    text = client.completions.create(model=RUN, prompt="once upon")
    assert text.choices[0].text == f"[{RUN}] once upon " and text.usage.completion_tokens == 3


def test_worker_failures(served):
    url, runner = served
    killed = ask(url, "die")
    assert killed.status_code == 503, killed.text
    error = killed.json()["error"]
    assert error["code"] == "chat_unavailable" and "Send again" in error["message"] and "Traceback" not in killed.text
    assert ask(url, "back again").json()["choices"][0]["message"]["content"] == f"[{RUN}] back again "
    assert ask(url, "boom").status_code == 503
    assert ask(url, "too long").status_code == 400
    streamed = ask(url, "die", stream=True)
    assert streamed.status_code == 503 and "Send again" in streamed.text


def test_a_client_leaving_mid_stream_frees_the_engine(served):
    url, runner = served
    ask(url, "warm up")
    words = " ".join(f"w{i}" for i in range(500))  # 10 s of tokens
    with httpx.stream(
        "POST",
        f"{url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
        json={"model": RUN, "messages": [{"role": "user", "content": words}], "stream": True},
    ) as answer:
        lines = answer.iter_lines()
        while "w1" not in next(lines):
            pass
    started = time.monotonic()
    assert ask(url, "next one").status_code == 200
    assert time.monotonic() - started < 5  # the abandoned generation was stopped, not run to its end


def test_chat_during_training_is_409(served, datasets_dir):
    url, runner = served
    from trainer_core.schemas import TrainingStartRequest

    runner.start(TrainingStartRequest(local_datasets=[str(datasets_dir / "identity.json")], max_steps=100))
    try:
        wait_for(lambda: runner.status().is_training_running, 10, "training")
        for stream in (False, True):
            refused = ask(url, "hello", stream=stream)
            assert refused.status_code == 409 and refused.headers["x-should-retry"] == "false"
            assert "training job is running" in refused.json()["error"]["message"]
    finally:
        runner.stop(save=False)
        runner.wait(10)
    wait_for(lambda: ask(url, "after").status_code == 200, 30, "chat to work again")


def test_the_engine_raises_the_errors_the_routes_map():
    from trainer_core.serving import engine, errors

    assert (engine.ChatUnavailable, engine.ChatInputError, engine.UnknownModel) == (
        errors.ChatUnavailable,
        errors.ChatInputError,
        errors.UnknownModel,
    )
