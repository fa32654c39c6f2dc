"""The Chat tab's Send per page (``ui.chat_turns``) with the fake engine: the Message box written
only at the first step, a second Send from the same page refused while the first answer streams,
and what ``after_send`` does with the boxes."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import gradio as gr

from tests.support.fake_engine import FakeEngine
from trainer_core.serving.schemas import GenerationSettings
from trainer_core.settings import Settings
from ui import chat_send, chat_turns

DEFAULTS = [f.default for f in GenerationSettings.model_fields.values()]
SKIP = gr.skip()


def _inputs(message: str, model: str = "base") -> list:
    return [model, False, "", message, [], [], *DEFAULTS]


def _page(name: str = "page-1") -> SimpleNamespace:
    return SimpleNamespace(session_hash=name)


def test_the_message_box_is_written_at_the_first_step_only():
    engine = FakeEngine()
    steps = list(chat_turns.PageSend(partial(chat_send.send, engine)).send(_page(), *_inputs("one two three")))
    assert steps[0][chat_turns.MESSAGE] == "" and steps[0][chat_turns.NOTICE] == ""  # taken: emptied once
    assert all(step[chat_turns.MESSAGE] == SKIP for step in steps[1:])
    assert all(step[chat_turns.NOTICE] == SKIP for step in steps[1:-1])
    assert steps[-1][chat_turns.NOTICE] == ""  # the API's last outputs say "no refusal"
    assert steps[-1][1][-1]["content"] == "echo: one two three"
    assert steps[-1][-1] == {"taken": True, "image": None, "clip": None}
    assert all(step[-1] == SKIP for step in steps[:-1])


def test_a_refused_send_keeps_its_message_in_the_box():
    steps = list(chat_turns.PageSend(partial(chat_send.send, FakeEngine())).send(_page(), *_inputs("  ")))
    assert len(steps) == 2 and steps[0][chat_turns.MESSAGE] == "  " and "Message" in steps[0][chat_turns.NOTICE]
    assert steps[-1][-1] == {"taken": False, "restore": ""}  # already in its box


def test_a_second_send_from_the_same_page_is_refused_while_the_first_streams():
    sender = chat_turns.PageSend(partial(chat_send.send, FakeEngine()))
    first = sender.send(_page(), *_inputs("a b c d"))
    next(first), next(first)  # streaming
    (refused,) = list(sender.send(_page(), *_inputs("typed meanwhile")))
    assert "Not sent while the answer above was being written" in refused[chat_turns.NOTICE]
    assert [i for i, value in enumerate(refused) if value != SKIP] == [chat_turns.NOTICE]  # the box untouched
    other = list(sender.send(_page("page-2"), *_inputs("x")))  # another page is not held up
    assert other[-1][-1]["taken"]
    rest = list(first)
    assert rest[-1][chat_turns.NOTICE] == SKIP  # the refusal stays shown after the answer ends
    assert rest[-1][-1]["taken"]
    assert list(sender.send(_page(), *_inputs("now")))[-1][-1]["taken"]  # the answer has ended: it goes


def test_a_failed_stream_frees_the_page():
    engine = FakeEngine()
    engine.crash_after = 1
    sender = chat_turns.PageSend(partial(chat_send.send, engine))
    try:
        list(sender.send(_page(), *_inputs("a b c")))
    except RuntimeError:
        pass
    engine.crash_after = None
    assert list(sender.send(_page(), *_inputs("again")))[-1][-1]["taken"]


def test_after_send_empties_only_what_the_turn_took_and_restores_only_into_an_empty_box(tmp_path):
    settings = Settings(data_dir=tmp_path)
    taken = {"taken": True, "image": None, "clip": None}
    assert chat_turns.after_send(settings, None, "typed", None, None) == (SKIP,) * 4
    assert chat_turns.after_send(settings, taken, "typed", None, None) == (SKIP, SKIP, SKIP, None)
    unsent = {"taken": False, "restore": "Hi"}
    assert chat_turns.after_send(settings, unsent, "", None, None)[2] == "Hi"
    assert chat_turns.after_send(settings, unsent, "typed meanwhile", None, None)[2] == SKIP
