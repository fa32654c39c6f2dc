"""The Chat tab through the page's own API (gradio_client), with a run trained in the app: load it,
chat (greedy answer equal to a direct ``generate`` with the same adapter), base vs tuned side by
side, refusals during training and for a run without weights; and the Tools box in a browser (the
call shown as a call, the typed result sent back as a ``tool`` turn)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.conftest import form_args, is_training, statuses, wait_for
from tests.support.page_tools import browser as browser  # the fixture (headless Chromium)
from ui.refusals import markdown_text

pytestmark = pytest.mark.slow
TUNE = dict(
    batch_size=2,
    max_seq_length=128,
    dataset_slice_end=16,
    lr_scheduler_type="constant",
    learning_rate=1e-3,
    max_steps=4,
    save_steps=2,
)
GREEDY = {"max_new_tokens": 24, "temperature": 0, "top_p": 0.9, "top_k": 50, "repetition_penalty": 1.0, "seed": 42}
PROMPT = "Who are you?"


def _chat_args(model_id: str, compare: bool, message: str, **settings) -> list:
    values = {**GREEDY, **settings}
    return [model_id, compare, "", message, [], [], *values.values()]


def _text(message: dict) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def _direct_generate(output_dir: Path, model_dir: Path, prompt: str, max_new_tokens: int) -> str:
    """The same adapter loaded with PEFT and ``model.generate`` greedily, outside the studio."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), output_dir).eval()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
    )
    inputs = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


@pytest.fixture(scope="module")
def tuned_run(app_server, datasets_dir, model_dir):
    """A LoRA run of the real model (the form's default) of 4 steps on identity.json trained through
    the page (checkpoints at 2 and 4)."""
    from gradio_client import Client

    runner, url = app_server
    runner.wait(120)
    client = Client(url, verbose=False)
    final = list(statuses(client.submit(*form_args(str(datasets_dir / "identity.json"), **TUNE), api_name="/start")))[
        -1
    ]
    assert final["phase"] == "completed", final
    return final["job_id"], Path(final["details"]["output_dir"])


def test_chat_with_a_trained_run_equals_direct_generate_and_differs_from_base(client, tuned_run, model_dir):
    job_id, output_dir = tuned_run
    loaded = client.predict(job_id, api_name="/chat_load")
    assert "is loaded" in loaded and markdown_text(job_id) in loaded  # Markdown: the label shown as typed
    _, tuned, base, _, notice = client.predict(*_chat_args(job_id, True, PROMPT), api_name="/chat")
    assert notice == ""
    assert [m["role"] for m in tuned] == ["user", "assistant"] and [m["role"] for m in base] == ["user", "assistant"]
    tuned_answer, base_answer = (
        _text(tuned[1]).replace(" [max_new_tokens reached]", ""),
        _text(base[1]).replace(" [max_new_tokens reached]", ""),
    )
    assert tuned_answer and base_answer and tuned_answer != base_answer
    assert tuned_answer.strip() == _direct_generate(output_dir, model_dir, PROMPT, GREEDY["max_new_tokens"]).strip()
    again = client.predict(*_chat_args(job_id, False, PROMPT), api_name="/chat")[1]
    assert _text(again[1]) == _text(tuned[1])  # same settings and seed, same answer


def test_checkpoints_and_base_are_offered_and_multi_turn_works(client, tuned_run):
    job_id, _ = tuned_run
    model, history, states = f"{job_id}/checkpoint-2", [], []
    for turn in ("Hello!", "What did I just say?"):
        args = _chat_args(model, False, turn, max_new_tokens=8)
        args[4] = history
        _, history, _, state, _ = client.predict(*args, api_name="/chat")
        states.append(state)
    assert "checkpoint-2" in states[0] and "is loaded" in states[0]  # the switch shows its load time
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert "is loaded" in client.predict("base", api_name="/chat_load")
    assert "is loaded" in client.predict(job_id, api_name="/chat_load")


def test_chat_is_refused_while_training_and_for_runs_without_weights(
    client, app_server, tuned_run, datasets_dir, tiny_model_dir
):
    runner, _ = app_server
    job = client.submit(  # the tiny model holds the machine (cancelled below, before any save)
        *form_args(
            str(datasets_dir / "alpaca_en_demo.json"),
            model_name=str(tiny_model_dir),
            max_steps=2000,
            batch_size=2,
            max_seq_length=128,
        ),
        api_name="/start",
    )
    wait_for(lambda: is_training(runner), 240, "training")
    # a refusal is a notice beside Send: the typed message and the conversation stay as they were
    kept, chat, _, state, notice = client.predict(*_chat_args(tuned_run[0], False, "Hi"), api_name="/chat")
    assert kept == "Hi" and chat == [] and "training job is running" in notice and "Not sent" in notice
    assert "Loading" not in state
    runner.stop(save=False)
    list(statuses(job))
    cancelled = runner.status().job_id
    for args, said in (
        (_chat_args(cancelled, False, "Hi"), "no saved weights|no weights|nothing to"),
        (_chat_args(tuned_run[0], False, "  "), "Message"),
        (_chat_args(tuned_run[0], False, "Hi", temperature=5), "temperature"),
    ):
        kept, chat, _, _, notice = client.predict(*args, api_name="/chat")
        assert kept == args[3] and chat == [] and re.search(said, notice), notice


def test_a_share_link_from_the_runs_tab_reaches_its_model_and_nothing_else(client, app_server, tuned_run):
    import httpx
    from openai import OpenAI

    runner, url = app_server
    job_id, _ = tuned_run
    text, table = client.predict(job_id, None, api_name="/share_create")
    assert job_id in text and "/s/" in text
    page_url = table["data"][0][4]
    link_id = table["data"][0][0]
    assert page_url.startswith(url.rstrip("/") + "/s/") and table["data"][0][2] == "active"
    assert httpx.get(page_url).status_code == 200
    openai = OpenAI(base_url=page_url + "/v1", api_key="unused", max_retries=0)
    assert [m.id for m in openai.models.list().data] == [job_id]
    answer = openai.chat.completions.create(
        model=job_id, messages=[{"role": "user", "content": PROMPT}], max_tokens=8, temperature=0
    )
    assert answer.choices[0].message.content and answer.usage.completion_tokens > 0
    # (with a login and token set, the share token opens nothing else: tests/e2e/test_share_security.py)
    other_model = OpenAI(base_url=page_url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(Exception, match="404|not"):
        other_model.chat.completions.create(model="base", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    revoked, table = client.predict(job_id, link_id, api_name="/share_revoke")
    assert "Revoked" in revoked and table["data"][0][2] == "revoked"
    assert httpx.get(page_url + "/v1/models").status_code in (401, 403, 404, 410)


WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
RESULT = '{"temperature_c": 18, "sky": "clear"}'


BUBBLES = "[data-testid=bot], [data-testid=user]"  # one element per message, in order


def _bubbles(page, chat: str) -> list[str]:
    """The texts of ``chat``'s messages in order (a call or result: its title, then its text)."""
    return page.locator(f"{chat} :is({BUBBLES})").all_inner_texts()


def _api_answer_to_result(url: str, model_id: str, question: str, arguments: dict, tokens: int) -> str:
    """The greedy answer of ``POST /v1/chat/completions`` (the ``openai`` client) to the question,
    its call and the tool's result sent as OpenAI's ``tool`` message."""
    import json

    from openai import OpenAI

    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(arguments)}}
    messages = [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
    ]
    client = OpenAI(base_url=url.rstrip("/") + "/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model=model_id, messages=messages, tools=WEATHER, temperature=0, max_tokens=tokens
    )
    return reply.choices[0].message.content or ""


@pytest.mark.browser
def test_the_tools_box_shows_the_call_as_a_call_and_sends_the_typed_result_back(app_server, browser, tmp_path):
    """A person pastes a function into the Tools box, picks tool choice *required* and sends: the
    base model's call is shown as a call (its name and JSON arguments, never ``<tool_call>`` text);
    the typed result goes back as a ``tool`` turn and the model answers again, exactly as the API
    answers the same call and result sent as OpenAI's ``tool`` message. (Tuned beside base, each side
    with its own calls and results: ``tests/ui/test_chat_tool_panel.py``.)"""
    import json

    from tests.e2e.conftest import screenshot

    question = "What is the weather in Paris?"
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    page.goto(app_server[1])
    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-model input").fill("base")  # a typed id is accepted
    page.locator("#chat-model input").press("Enter")
    page.get_by_text("Generation settings").click()
    page.locator("#field-temperature input").fill("0")
    page.locator("#field-max_new_tokens input").fill("48")  # a forced call of get_weather: ~25 tokens
    page.get_by_text("Tools (function calling)").click()
    page.locator("#chat-tools textarea").fill(json.dumps(WEATHER))
    page.locator("#chat-tool-choice").get_by_label("required").check()
    page.locator("#chat-tools-summary").get_by_text("1 function: get_weather").wait_for(timeout=15_000)
    message = page.locator("#chat-message textarea")
    message.fill(question)
    message.press("Enter")
    page.locator("#chat-tuned [data-testid=bot]").get_by_text("get_weather(").first.wait_for(timeout=240_000)
    shown = _bubbles(page, "#chat-tuned")
    assert not any("<tool_call>" in text for text in shown), shown
    call = shown[-1]
    assert "Tool call" in call and "waiting for its result" in call, shown
    name, _, arguments = call[call.index("get_weather(") :].strip().partition("(")
    arguments = json.loads(arguments.rstrip().removesuffix(")"))
    assert name == "get_weather" and isinstance(arguments["city"], str)  # the schema's required string
    screenshot(page, tmp_path, "chat-tool-calls.png")
    page.locator("#field-max_new_tokens input").fill("8")
    page.locator("#chat-tool-result textarea").fill(RESULT)
    page.locator("#chat-tool-send").click()
    page.wait_for_function(
        "([c, b]) => { const m = [...document.querySelectorAll(c + ' :is(' + b + ')')]; const i = m.findIndex("
        "e => e.innerText.includes('Tool result')); return i >= 0 && i < m.length - 1 && "
        "m[m.length - 1].innerText.trim().length > 0; }",
        arg=["#chat-tuned", BUBBLES],
        timeout=240_000,
    )
    api = _api_answer_to_result(app_server[1], "base", question, arguments, 8)  # its turn: after the page's answer
    page.wait_for_function("() => document.querySelector('#chat-notice').innerText.trim() === ''", timeout=15_000)
    screenshot(page, tmp_path, "chat-tool-result.png")
    shown = _bubbles(page, "#chat-tuned")
    assert "Tool result" in shown[-2] and RESULT in shown[-2] and "waiting" not in shown[-3]
    assert shown[-1].replace(" [max_new_tokens reached]", "").split() == api.split()  # as shown: spaces collapse
    page.close()
