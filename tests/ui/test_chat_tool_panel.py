"""The Chat tab's Send with tools and its *Send tool result*, with the fake engine (which calls a
function when asked ``call NAME {json}``): the calls shown as calls on both sides of Base vs tuned,
the results going back as ``tool`` turns (each side's own, or one for both) and the answer after
them, parallel calls answered one by one, refusals that keep everything, the accordion hidden for
models whose Send takes no tools."""

from __future__ import annotations

import json

from tests.support.fake_engine import FakeEngine
from ui import chat_checks, chat_send, chat_tool_panel, chat_tools

DEFAULTS = (None,) * len(chat_checks.SETTINGS_FIELDS)  # the generation settings widgets, untouched
TOOLS = json.dumps(chat_tools.EXAMPLES["Home: set_light, get_time"])
JOB = "job_tools"


def _engine() -> FakeEngine:
    engine = FakeEngine()
    engine.add(JOB)
    return engine


def _send(engine, message, history=(), base=(), compare=True, tools=TOOLS, choice="auto"):
    """The last outputs of Send: (textbox, chat, base chat, state, notice, images, clips)."""
    values = (*DEFAULTS, None, [], None, [], "0", tools, choice)  # states, voice, then the Tools box
    return list(chat_send.send(engine, JOB, compare, "", message, list(history), list(base), *values))[-1]


def _results(engine, result, history, base=(), base_result="", compare=True, choice="auto"):
    """The last outputs of Send tool result: (result box, base result box, chat, base chat, state, notice)."""
    values = (*DEFAULTS, [None], [None], TOOLS, choice)
    sent = chat_tool_panel.send_results(
        engine, JOB, compare, "", result, base_result, list(history), list(base), *values
    )
    return list(sent)[-1]


def test_both_sides_show_the_call_and_answer_again_after_the_result():
    engine = _engine()
    _, tuned, base, _, notice, _, _ = _send(engine, 'call set_light {"room": "kitchen", "on": true}', choice="required")
    assert notice == ""
    for side in (tuned, base):
        assert [m["content"] for m in side[1:]] == ["Sure.\n", 'set_light({"room": "kitchen", "on": true})']
        assert side[-1]["metadata"]["title"] == chat_tools.CALL_TITLE
    assert [request[1] for request in engine.tool_requests] == ["required", "required"]
    assert engine.tool_requests[0][0][0]["function"]["name"] == "set_light"
    boxes = _results(engine, '{"ok": true}', tuned, base, base_result="")
    assert boxes[:2] == ("", "") and boxes[5] == ""
    for side in boxes[2:4]:
        assert side[-2]["content"] == '{"ok": true}' and side[-2]["metadata"]["title"] == chat_tools.RESULT_TITLE
        assert side[-1] == {"role": "assistant", "content": 'echo: <tool_response>\n{"ok": true}\n</tool_response>'}
    answering = engine.calls[-2:]  # tuned (adapter on), then base; each its own call's id, one result each
    assert [m.role for m in answering[0][1]] == ["user", "assistant", "tool"]
    assert [request[1] for request in engine.tool_requests[2:]] == ["auto", "auto"]  # the answer to results: free


def test_each_side_takes_its_own_result_and_waits_for_all_its_calls():
    engine = _engine()
    _, tuned, base, *_ = _send(engine, "calls 2")  # two calls of get_time on each side
    assert [m["content"] for m in tuned] == ["calls 2", 'get_time({"n": 0})', 'get_time({"n": 1})']
    asked = len(engine.calls)
    first = _results(engine, "9:00", tuned, base, base_result="10:00")
    assert len(engine.calls) == asked  # a call still waits on each side: no answer yet
    assert first[2][-1]["content"] == "9:00" and first[3][-1]["content"] == "10:00"
    kept, *_ = _send(engine, "and now?", first[2], first[3])[4:5]
    assert "waits for its result" in kept  # a message must wait for the results
    done = _results(engine, "9:01", first[2], first[3])  # the base box empty: the same result for both
    assert [m.role for m in engine.calls[-1][1]] == ["user", "assistant", "tool", "tool"]
    assert "10:00" in engine.calls[-1][1][2].content and "9:01" in engine.calls[-1][1][3].content
    assert chat_tools.pending(done[2]) == [] and chat_tools.pending(done[3]) == []


def test_a_refused_result_keeps_the_boxes_and_the_chats():
    engine = _engine()
    _, tuned, _, *_ = _send(engine, "call get_time {}", compare=False)
    engine.busy = True  # a training job has the machine
    result, base_result, chat, base, _, notice = _results(engine, "noon", tuned, [], "x", compare=False)
    assert (chat, base) == (tuned, []) and "training job" in notice and "Not sent" in notice
    assert result is not None and "'" not in notice.split("</strong>")[1][:2]  # the message, not its repr
    engine.busy = False
    _, _, chat, _, _, notice = _results(engine, "", tuned, compare=False)
    assert chat == tuned and "Tool result: type the result of get_time" in notice
    _, _, chat, _, _, notice = _results(engine, "noon", [], compare=False)
    assert chat == [] and "no tool call waits" in notice
    kept, chat, *_, notice, _, _ = _send(engine, "hi", tools="[{", compare=False)
    assert kept == "hi" and chat == [] and "Tools: not valid JSON" in notice


def test_without_tools_the_chat_is_plain_and_the_accordion_follows_the_model():
    engine = _engine()
    _, tuned, *_ = _send(engine, "call get_time {}", tools="", compare=False)
    assert tuned[-1] == {"role": "assistant", "content": "echo: call get_time {}"}
    assert engine.tool_requests[-1] == (None, "auto")  # no tools sent: the engine's plain chat
    engine.add("job_tts", serves="speech")
    assert chat_tool_panel.shown(engine, JOB)["visible"] is True
    assert chat_tool_panel.shown(engine, None)["visible"] is True
    assert chat_tool_panel.shown(engine, "job_tts")["visible"] is False
