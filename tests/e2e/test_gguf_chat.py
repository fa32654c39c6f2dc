"""Chat with a GGUF export through llama.cpp: the export's files listed as models (Chat tab and
``GET /v1/models``), answers streamed by the llama.cpp worker through the ``openai`` client, the
prompt rendered by the file's own chat template to the run's tokenizer's ids, Stop, the limits,
and the doors (a folder outside the allowed ones, a name that leaves the folder, a planted link,
an unbuilt llama.cpp), and the Codex-style round trip through ``/v1/responses``. The GGUF is the bundled SmolLM2-135M-Instruct Q4_1 file, copied into an
export task's folder as an export writes it; the real export-then-chat path is in
``test_export_real.py``."""

from __future__ import annotations

import os
import re
import shutil
import threading

import openai
import pytest

from tests.e2e.conftest import ServerThread
from tests.support.codex_round_trip import codex_round_trip
from tests.support.page_tools import browser as browser  # the fixture (headless Chromium)
from trainer_core.llamacpp import build as tools
from trainer_core.serving.errors import ChatInputError, UnknownModel
from trainer_core.serving.schemas import ChatMessage, GenerationSettings
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord

JOB = "job_20261205_090000_0a1b2c3d"
EXPORT = "export-20261205-091500-a1b2c3"
FILE = f"{JOB}-q4_k_m.gguf"
GREEDY = GenerationSettings(temperature=0, max_new_tokens=24)
QUESTION = [ChatMessage(role="user", content="What is the capital of France?")]


def _task(task_id, folder, phase=TaskPhase.completed, entries=None):
    entries = entries if entries is not None else [{"name": FILE, "type": "q4_k_m", "check": {"passed": True}}]
    return TaskRecord(
        task_id=task_id,
        kind=TaskKind.export,
        job_id=JOB,
        model=JOB,
        phase=phase,
        output_dir=str(folder),
        result={"format": "gguf-q4_k_m", "gguf": entries},
    )


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """(settings, runner, engine, task store, export folder, url): the whole app (API + page)
    with one run and its q4_k_m export in the history."""
    from server import build_app
    from trainer_core.models.loading import bundled_gguf_path
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings, get_settings
    from trainer_core.tasks.store import TaskStore

    llama_dir = get_settings().llama_cpp_dir
    if tools.missing_message(llama_dir):  # .ci/run fails before the tests when it is missing
        pytest.skip(tools.missing_message(llama_dir))
    settings = Settings(data_dir=tmp_path_factory.mktemp("gguf-chat"), llama_cpp_dir=llama_dir)  # no login
    run = settings.runs_dir / JOB
    folder = run / "exports" / EXPORT
    folder.mkdir(parents=True)
    shutil.copyfile(bundled_gguf_path(), folder / FILE)
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(settings.db_path))
    runner.store.create_run(JOB, {"model_name": "HuggingFaceTB/SmolLM2-135M-Instruct"}, str(run), "completed")
    tasks = TaskStore(settings.db_path)
    tasks.save(_task(EXPORT, folder))
    app = build_app(settings, runner)
    engine = app.state.engine
    with ServerThread(app) as server:
        yield settings, runner, engine, tasks, folder, server.url.rstrip("/")
        engine.unload()


def test_the_export_is_a_model_and_answers_through_the_openai_client(studio, tokenizer):
    settings, runner, engine, _, _, url = studio
    listed = {c.id: c for c in engine.choices()}
    choice = listed[f"{EXPORT}/q4_k_m"]
    assert choice.kind == "gguf" and choice.gguf_type == "q4_k_m" and choice.path.endswith(FILE)
    size = round(os.path.getsize(choice.path) / 1e6)
    assert choice.label == f"{JOB} · GGUF q4_k_m in llama.cpp ({size} MB, check passed)"
    assert engine.resolve(EXPORT).id == choice.id  # the bare export id names its first file
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="no-token-set", max_retries=0)
    assert f"{EXPORT}/q4_k_m" in [m.id for m in client.models.list()]
    question = [{"role": "user", "content": "What is the capital of France?"}]
    reply = client.chat.completions.create(model=EXPORT, messages=question, temperature=0, max_tokens=24)
    answer = reply.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model=f"{EXPORT}/q4_k_m", messages=question, temperature=0, max_tokens=24, stream=True
        )
    )
    assert answer and "".join(c.choices[0].delta.content or "" for c in chunks) == answer  # greedy: the same
    # the prompt is the file's template rendered to exactly the tokenizer's ids: same count
    want = tokenizer.apply_chat_template(question, tokenize=True, add_generation_prompt=True)
    want = want["input_ids"] if hasattr(want, "keys") else want
    assert reply.usage.prompt_tokens == len(want)
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 24
    assert engine.state()["loaded"] == f"{EXPORT}/q4_k_m"


def test_tools_and_text_completions_through_the_gguf(studio, tokenizer):
    from trainer_core.serving.generate import render_prompt

    _, _, _, _, _, url = studio
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="no-token-set", max_retries=0)
    tool = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
    call = {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "noon"},
    ]
    reply = client.chat.completions.create(model=EXPORT, messages=messages, tools=[tool], temperature=0, max_tokens=1)
    canonical = [
        messages[0],
        {"role": "assistant", "content": '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'},
        {"role": "tool", "content": "<tool_response>\nnoon\n</tool_response>"},
    ]
    # the file's template with the tools fallback renders to exactly the run's tokenizer's ids: same count
    assert reply.usage.prompt_tokens == len(render_prompt(tokenizer, canonical, [tool]))
    items = [
        {"role": "user", "content": "What time is it?"},
        {"type": "function_call", "call_id": "c1", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "noon"},
    ]
    flat = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
    answer = client.responses.create(model=EXPORT, input=items, tools=[flat], temperature=0, max_output_tokens=1)
    assert answer.usage.input_tokens == reply.usage.prompt_tokens  # the Responses items: the same prompt
    text = client.completions.create(model=EXPORT, prompt="The capital of France is", temperature=0, max_tokens=2)
    assert text.usage.prompt_tokens == len(tokenizer("The capital of France is")["input_ids"])
    assert text.choices[0].text and text.usage.completion_tokens == 2


def test_the_codex_style_round_trip_through_the_gguf(studio):
    """``responses.create`` against the export in llama.cpp: the call forced (required, then the
    function named: llguidance over llama.cpp's vocabulary), its result sent back, an answer in words."""
    *_, url = studio
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="no-token-set", max_retries=0)
    first, final = codex_round_trip(client, EXPORT, "required")
    named, _ = codex_round_trip(client, f"{EXPORT}/q4_k_m", {"type": "function", "name": "get_weather"})
    assert named.output[0].arguments == first.output[0].arguments
    print("round trip with the GGUF:", first.output[0].arguments, "->", repr(final.output_text))


def test_sampling_follows_the_seed_and_a_multi_turn_chat_continues(studio):
    _, _, engine, _, _, _ = studio
    sampled = GenerationSettings(temperature=0.9, top_p=0.95, top_k=40, max_new_tokens=16, seed=7)
    first = engine.complete(EXPORT, QUESTION, sampled)
    assert engine.complete(EXPORT, QUESTION, sampled).delta == first.delta  # the same seed, the same answer
    others = {engine.complete(EXPORT, QUESTION, sampled.model_copy(update={"seed": s})).delta for s in (1, 2, 3)}
    assert len(others | {first.delta}) > 1
    turns = [
        ChatMessage(role="system", content="You answer in one word."),
        *QUESTION,
        ChatMessage(role="assistant", content="Paris."),
        ChatMessage(role="user", content="And of Italy?"),
    ]
    follow_up = engine.complete(EXPORT, turns, GREEDY)
    assert follow_up.prompt_tokens > 40 and follow_up.delta


def test_stop_generation_and_the_context_limit(studio):
    _, _, engine, _, _, _ = studio
    events, stopped = [], threading.Event()
    for event in engine.stream(EXPORT, QUESTION, GenerationSettings(temperature=0, max_new_tokens=2000)):
        events.append(event)
        if len(events) == 3:
            stopped.set()
            assert engine.stop_generation()
    assert stopped.is_set() and events[-1].finish_reason == "cancelled" and events[-1].completion_tokens < 100
    long = [ChatMessage(role="user", content="word " * 9000)]
    with pytest.raises(ChatInputError, match="over this GGUF's context of 8192 tokens"):
        engine.complete(EXPORT, long, GREEDY)
    assert engine.complete(EXPORT, QUESTION, GREEDY).delta  # the worker lives on


def test_base_comparison_is_refused_with_the_reason(studio):
    _, _, engine, _, _, _ = studio
    with pytest.raises(ChatInputError, match="holds only the tuned weights.*choose the run it was exported from"):
        engine.stream(EXPORT, QUESTION, GREEDY, use_adapter=False)


def test_doors_unknown_running_outside_planted_and_unbuilt(studio, tmp_path):
    settings, runner, engine, tasks, folder, _ = studio
    with pytest.raises(UnknownModel, match="no such export"):
        engine.resolve("export-20990101-000000-ffffff")
    with pytest.raises(UnknownModel, match="has no 'q8_0' file \\(it has q4_k_m\\)"):
        engine.resolve(f"{EXPORT}/q8_0")
    tasks.save(_task("export-20261205-092000-bbbbbb", folder, phase=TaskPhase.running))
    with pytest.raises(ChatInputError, match="still running"):
        engine.resolve("export-20261205-092000-bbbbbb")
    outside = tmp_path / "elsewhere"  # a record pointing out of the allowed folders (a tampered history)
    outside.mkdir()
    shutil.copyfile(folder / FILE, outside / FILE)
    tasks.save(_task("export-20261205-093000-cccccc", outside))
    with pytest.raises(ChatInputError, match="not in the allowed folders|outside"):
        engine.resolve("export-20261205-093000-cccccc")
    escape = [{"name": f"../../{JOB}/x.gguf", "type": "q4_k_m"}, {"name": "/etc/passwd", "type": "q8_0"}]
    tasks.save(_task("export-20261205-094000-dddddd", folder, entries=escape))
    planted = settings.runs_dir / JOB / "exports" / "planted"
    planted.mkdir()
    os.symlink(outside / FILE, planted / "link.gguf")
    tasks.save(_task("export-20261205-095000-eeeeee", planted, entries=[{"name": "link.gguf", "type": "q4_k_m"}]))
    for task_id in ("export-20261205-094000-dddddd", "export-20261205-095000-eeeeee"):
        with pytest.raises(ChatInputError, match="has no GGUF file to talk to"):
            engine.resolve(task_id)
    damaged = settings.runs_dir / JOB / "exports" / "damaged"
    damaged.mkdir()
    (damaged / FILE).write_bytes(b"GGUF" + b"\0" * 64)  # a GGUF header with nothing behind it
    tasks.save(_task("export-20261205-096000-ffffff", damaged))
    with pytest.raises(ChatInputError, match="llama.cpp could not read .*damaged"):
        engine.load("export-20261205-096000-ffffff")
    listed = [c.id for c in engine.choices() if c.kind == "gguf"]
    assert listed == ["export-20261205-096000-ffffff/q4_k_m", f"{EXPORT}/q4_k_m"]  # newest export first
    unbuilt = settings.model_copy(update={"llama_cpp_dir": tmp_path / "no-build"})
    engine._models._settings = unbuilt
    try:
        assert [c for c in engine.choices() if c.kind == "gguf"] == []
        with pytest.raises(ChatInputError, match="runs it in llama.cpp.*bash scripts/setup.sh"):
            engine.resolve(EXPORT)
    finally:
        engine._models._settings = settings


def test_the_chat_tab_lists_and_answers_with_the_gguf_and_refuses_base_vs_tuned(studio):
    from gradio_client import Client

    _, _, engine, _, _, url = studio
    client = Client(url, verbose=False)
    model_id = f"{EXPORT}/q4_k_m"
    args = [model_id, False, "", "What is the capital of France?", [], []]
    settings = {
        "max_new_tokens": 12,
        "temperature": 0,
        "top_p": 0.9,
        "top_k": 50,
        "repetition_penalty": 1.0,
        "seed": 42,
    }
    _, chat, _, _, notice = client.predict(*args, *settings.values(), api_name="/chat")
    direct = engine.complete(model_id, QUESTION, GenerationSettings(**settings)).delta
    answer = chat[1]["content"] if isinstance(chat[1]["content"], str) else chat[1]["content"][0]["text"]
    assert [m["role"] for m in chat] == ["user", "assistant"] and answer.startswith(direct)
    assert notice == ""
    kept, chat, _, _, notice = client.predict(model_id, True, *args[2:], *settings.values(), api_name="/chat")
    assert kept == args[3] and chat == [] and re.search("holds only the tuned weights.*choose the run it", notice)


@pytest.mark.slow
@pytest.mark.browser
def test_the_chat_tab_in_a_browser_answers_with_the_gguf(studio, browser, tmp_path):
    """A person picks the GGUF export in the Chat tab's model list and chats with it; with Base vs
    tuned ticked a notice beside Send says why it cannot compare, and the typed message stays."""
    from tests.e2e.conftest import screenshot

    *_, folder, url = studio
    size = round(os.path.getsize(folder / FILE) / 1e6)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(url)
    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-model input").click()
    page.get_by_role("option", name=f"{JOB} · GGUF q4_k_m in llama.cpp ({size} MB, check passed)").click()
    message = page.locator("#chat-message textarea")
    page.locator("#chat-compare input").check()
    message.fill("What is the capital of France?")
    message.press("Enter")
    page.locator("#chat-notice").get_by_text("a GGUF export holds only the tuned weights").wait_for(timeout=30_000)
    screenshot(page, tmp_path, "gguf-compare-refused.png")
    assert message.input_value() == "What is the capital of France?"  # kept for the next try
    for part in ("#chat-tuned", "#chat-message", "#chat-state"):  # a notice, not error badges
        assert page.locator(part).get_by_text("Error", exact=True).count() == 0
    page.locator("#chat-compare input").uncheck()
    message.press("Enter")
    page.locator("#chat-state").get_by_text("is loaded").wait_for(timeout=120_000)
    page.wait_for_function(
        "[...document.querySelectorAll('#chat-tuned .message')].pop().innerText.trim().length > 8", timeout=120_000
    )
    assert page.locator("#chat-notice").inner_text().strip() == ""  # the notice goes with the next send
    screenshot(page, tmp_path, "gguf-chat.png")
    assert "What is the capital of France?" in page.locator("#chat-tuned").inner_text()
    assert "GGUF q4_k_m in llama.cpp" in page.locator("#chat-state").inner_text()
    page.close()
