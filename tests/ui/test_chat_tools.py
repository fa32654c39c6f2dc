"""The Chat tab's Tools box, function by function: the box checked by the API's rules with errors
naming the box, the ready examples, calls shown as calls and results answering the oldest waiting
call, and the chat read back into the very conversation the API builds from OpenAI messages."""

from __future__ import annotations

import json
import re

import pytest

from api.openai_messages import RequestMessage, chat_messages
from ui import chat_handlers, chat_tools
from ui.refused import Refused

WEATHER = json.dumps(chat_tools.EXAMPLES["Weather: get_weather"])
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
CALL_2 = {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}


def test_every_example_passes_the_api_rules_and_fills_the_box():
    for name, tools in chat_tools.EXAMPLES.items():
        text = chat_tools.example(name)
        assert json.loads(text) == tools
        checked = chat_tools.checked(text, "required")  # a forced call's grammar compiles too
        assert [t["type"] for t in checked.tools] == ["function"] * len(tools)
    bare = chat_tools.checked(chat_tools.example("glaive demo: calculate_bmi, convert_currency"))
    assert [t["function"]["name"] for t in bare.tools] == ["calculate_bmi", "convert_currency"]  # bare: wrapped


@pytest.mark.parametrize(
    ("text", "choice", "said"),
    [
        ("[{", "auto", r"Tools: not valid JSON"),
        ('[{"name": "get weather"}]', "auto", r"Tools\[0\]\.name: 'get weather' is not a function name"),
        ('[{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]', "auto", r"Tools\[0\]"),
        ('[{"name": "f"}, {"name": "f"}]', "auto", r"Tools\[1\]\.function\.name: 'f' is defined twice"),
        ('{"type": "web_search"}', "auto", r"Tools\[0\]\.type: 'web_search': only function tools"),
        (WEATHER, "sometimes", r"Tool choice: choose one of auto, none, required"),
    ],
)
def test_a_bad_box_is_refused_naming_it(text, choice, said):
    assert _refused(said, chat_tools.checked, text, choice).code == chat_tools.CODE
    assert chat_tools.summary(text).startswith("**Not usable:**") or choice == "sometimes"


def test_the_summary_and_the_engine_settings():
    assert chat_tools.summary("") == "No tools: a plain chat."
    assert chat_tools.summary(WEATHER) == "1 function: `get_weather`."
    assert chat_tools.checked("", "required").request() == {}  # no tools: a plain chat
    required = chat_tools.checked(WEATHER, "required")
    assert required.request() == {"tools": required.tools, "tool_choice": "required"}
    assert required.request(after_results=True)["tool_choice"] == "auto"  # the answer to results is free
    assert chat_tools.checked(WEATHER, "none").request(after_results=True)["tool_choice"] == "none"


def _refused(pattern: str, call, *args) -> Refused:
    """The refusal ``call(*args)`` raises; its message (as the notice shows it) starts as ``pattern``."""
    with pytest.raises(Refused) as refused:
        call(*args)
    assert re.match(pattern, refused.value.message), refused.value.message
    return refused.value


def _called(*calls, text="Let me check."):
    history = [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": text}]
    chat_tools.show_calls(history, list(calls))
    return history


def test_calls_are_shown_as_calls_and_results_answer_the_oldest_waiting_one():
    history = _called(CALL, CALL_2, text="")
    assert [m["content"] for m in history[1:]] == ['get_weather({"city": "Paris"})', "get_time({})"]  # no empty text
    assert history[1]["metadata"] == {"title": chat_tools.CALL_TITLE, "id": "call_1", "log": chat_tools.WAITING}
    assert chat_tools.pending(history) == [("call_1", "get_weather"), ("call_2", "get_time")]
    history = chat_tools.answered(history, "18 C")
    assert chat_tools.pending(history) == [("call_2", "get_time")]
    assert history[1]["metadata"] == {"title": chat_tools.CALL_TITLE, "id": "call_1"}  # no longer waiting
    assert history[-1] == {
        "role": "user",
        "content": "18 C",
        "metadata": {"title": chat_tools.RESULT_TITLE, "id": "call_1", "log": "get_weather"},
    }
    assert chat_tools.pending(chat_tools.answered(history, "noon")) == []
    kept = _called(text="Hello")
    chat_tools.show_calls(kept, None)
    assert kept[-1] == {"role": "assistant", "content": "Hello"}


def test_the_chat_reads_back_as_the_conversation_the_api_builds():
    """The page's chat (as the browser sends it back: content as text parts) and the same turns as
    OpenAI messages give the same canonical messages: one rendering path for both doors."""
    history = chat_tools.answered(chat_tools.answered(_called(CALL, CALL_2), "18 C"), "noon")
    history.append({"role": "assistant", "content": "It is 18 C at noon."})
    sent_back = [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in history]
    page = chat_handlers.conversation("Be brief.", sent_back, "Thanks!")
    api = chat_messages(
        [
            RequestMessage(role="system", content="Be brief."),
            RequestMessage(role="user", content="Weather in Paris?"),
            RequestMessage(role="assistant", content="Let me check.", tool_calls=[CALL, CALL_2]),
            RequestMessage(role="tool", tool_call_id="call_1", content="18 C"),
            RequestMessage(role="tool", tool_call_id="call_2", content="noon"),
            RequestMessage(role="assistant", content="It is 18 C at noon."),
            RequestMessage(role="user", content="Thanks!"),
        ]
    )
    assert [m.model_dump() for m in page] == [m.model_dump() for m in api]
    answering = chat_handlers.conversation("", history[:-1], None)  # the answer to the results: no new turn
    assert [m.role for m in answering] == ["user", "assistant", "tool", "tool"]


def test_a_call_that_is_not_name_and_json_is_refused_not_a_traceback():
    history = _called(CALL)
    history[-1] = {**history[-1], "content": "get_weather(not json)"}
    _refused(r"Chat: a tool call reads", chat_handlers.conversation, "", history, "hi")


def test_a_message_waits_for_the_results_and_results_need_a_waiting_call():
    settings = chat_tools.checked(WEATHER)
    assert chat_tools.for_message(settings, [], []) is settings
    waiting = r"Message: the model called get_weather and waits for its result"
    _refused(waiting, chat_tools.for_message, settings, [], _called(CALL))  # the base side's call counts too
    none = _refused(r"Tool result: no tool call waits for a result", chat_tools.results_for, [], [], "18 C", "")
    assert none.code == "no_tool_call"
    _refused(r"Tool result: type the result of get_weather", chat_tools.results_for, _called(CALL), [], "  ", "")
    both = r"Tool result \(base\): type the result of get_time .*for both\)"
    _refused(both, chat_tools.results_for, [], _called(CALL_2), "", "")


def test_each_side_takes_its_own_result_or_the_shared_one():
    tuned, base = _called(CALL), _called(CALL_2)
    assert chat_tools.results_for(tuned, base, "18 C", "") == ("18 C", "18 C")  # base box empty: the same
    assert chat_tools.results_for(tuned, base, "18 C", " noon ") == ("18 C", "noon")
    assert chat_tools.results_for(tuned, [], "18 C", "noon") == ("18 C", None)  # no call waits on base
    assert chat_tools.results_for([], base, "", "noon") == (None, "noon")
