"""Typing in the Chat tab while an answer streams, in a browser: the Chat tab alone, served with the
fake engine answering one slow word at a time (``tests/support/fake_engine.py``). What the user types
during the stream is intact when it ends; a Send during the stream is refused beside Send, its
message kept in the box and sent by the next Send."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ServerThread
from tests.support.page_tools import browser as browser  # the fixture (headless Chromium)

JOB = "job_20250102_090000_0a0b0c0d"
STORY = "Tell me a story about a lighthouse " + " ".join(f"w{n}" for n in range(20))  # 27 words, echoed
TYPED = "and then what happened?"


@pytest.fixture(scope="module")
def slow_chat(tmp_path_factory):
    """(fake engine, url) of a page holding the Chat tab, the engine writing a word every 0.12 s."""
    import gradio as gr
    from fastapi import FastAPI

    from tests.support.fake_engine import FakeEngine
    from trainer_core.settings import Settings
    from ui.chat_tab import ChatTab

    engine = FakeEngine()
    engine.add(JOB)
    engine.token_delay_s = 0.12
    with gr.Blocks() as page:
        with gr.Tabs():
            ChatTab(engine, Settings(data_dir=tmp_path_factory.mktemp("chat-typing")))
    with ServerThread(gr.mount_gradio_app(FastAPI(), page.queue(), "/")) as server:
        yield engine, server.url


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1300, "height": 1100})
    page.goto(url)
    page.get_by_role("tab", name="Chat").click()
    page.locator("#chat-model input").fill(JOB)  # a typed id is accepted
    page.locator("#chat-model input").press("Enter")
    page.locator("#chat-compare input").check()
    return page


def _last_answer(page, chat: str) -> str:
    answers = page.locator(f"{chat} [data-testid=bot]").all_inner_texts()
    return answers[-1] if answers else ""


def _wait_streaming(page) -> None:
    page.wait_for_function(
        "() => { const b = [...document.querySelectorAll('#chat-tuned [data-testid=bot]')]; "
        "return b.length && b[b.length - 1].innerText.includes('echo:'); }",
        timeout=30_000,
    )


def _wait_ended(page, last_word: str) -> None:
    """Both answers written to ``last_word`` (the base side streams second), and the send's last
    step done."""
    page.wait_for_function(
        "(w) => { const b = [...document.querySelectorAll('#chat-base [data-testid=bot]')]; "
        "return b.length && b[b.length - 1].innerText.trim().endsWith(w); }",
        arg=last_word,
        timeout=60_000,
    )
    page.wait_for_timeout(800)


@pytest.mark.browser
def test_text_typed_while_an_answer_streams_is_intact_when_it_ends(slow_chat, browser):
    _, url = slow_chat
    page = _open(browser, url)
    box = page.locator("#chat-message textarea")
    box.fill(STORY)
    box.press("Enter")
    _wait_streaming(page)
    assert box.input_value() == ""  # the sent message left the box when it was taken
    box.press_sequentially(TYPED, delay=40)  # a person typing, over about a second of streaming
    samples = []
    for _ in range(10):  # sampled through the rest of the stream (the issue saw it emptied each time)
        page.wait_for_timeout(250)
        samples.append(box.input_value())
    _wait_ended(page, "w19")
    assert samples == [TYPED] * 10
    assert box.input_value() == TYPED
    assert _last_answer(page, "#chat-tuned").startswith("echo: Tell me a story")
    state = page.locator("#chat-state").inner_text()
    assert (
        "Tuned: 28 tokens in" in state and "base: 28 tokens in" in state and "tokens/s" in state
    )  # each answer's speed
    page.close()


@pytest.mark.browser
def test_a_send_during_a_stream_is_refused_visibly_and_its_message_kept(slow_chat, browser):
    engine, url = slow_chat
    page = _open(browser, url)
    box = page.locator("#chat-message textarea")
    box.fill(STORY)
    page.locator("#chat-send").click()
    _wait_streaming(page)
    box.fill(TYPED)
    page.locator("#chat-send").click()  # the answer is still being written
    notice = page.locator("#chat-notice")
    notice.get_by_text("Not sent while the answer above was being written").wait_for(timeout=10_000)
    box.press("Enter")  # Enter is refused the same way
    _wait_ended(page, "w19")
    assert "Press Send again when the answer ends" in notice.inner_text()  # still shown at the end
    assert box.input_value() == TYPED
    users = page.locator("#chat-tuned [data-testid=user]").all_inner_texts()
    assert len(users) == 1 and users[0].startswith("Tell me a story")  # nothing else was sent
    asked = [messages[-1].content for _, messages, _ in engine.calls]
    assert TYPED not in asked
    page.locator("#chat-send").click()  # the answer has ended: now it goes
    page.wait_for_function(
        "(t) => [...document.querySelectorAll('#chat-tuned [data-testid=bot]')].some("
        "e => e.innerText.trim().endsWith(t.split(' ').pop()) && e.innerText.includes('echo: and'))",
        arg=TYPED,
        timeout=30_000,
    )
    assert box.input_value() == "" and notice.inner_text().strip() == ""
    page.close()
