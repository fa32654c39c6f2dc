"""Tool-call scores: valid calls, the right function, the same arguments (order free), and calling
only when the row calls."""

from __future__ import annotations

import pytest

from trainer_core.tools.definitions import tool_list
from trainer_core.tools.scoring import Said, score_calls

TOOLS = tool_list(
    [
        {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
        {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    ]
)
PARIS = {"name": "get_weather", "arguments": {"city": "Paris"}}


def test_each_share_counts_its_own_rows():
    expected = [[PARIS], [PARIS], [PARIS], [PARIS], [], []]
    said = [
        Said([{"name": "get_weather", "arguments": '{"city": "Paris"}'}], True),  # right, as JSON text
        Said([{"name": "get_weather", "arguments": {"city": "Rome"}}], True),  # right function, other city
        Said([{"name": "get_time", "arguments": {}}], True),  # valid, wrong function
        Said([], True),  # began a call that did not parse
        Said([], False),  # words, as it should
        Said([{"name": "get_weather", "arguments": {"town": "Paris"}}], True),  # called when it should not; invalid
    ]
    scores = score_calls(expected, said, [TOOLS] * 6)
    assert (scores.rows, scores.should_call, scores.attempted) == (6, 4, 5)
    assert scores.valid_call_rate == pytest.approx(3 / 5)  # rows 1-3 valid; row 4 unparsed, row 6 breaks the schema
    assert scores.name_accuracy == pytest.approx(2 / 4)
    assert scores.arguments_exact == pytest.approx(1 / 4)
    assert scores.called_when_should == 1.0 and scores.quiet_when_should_not == pytest.approx(1 / 2)


def test_no_rows_of_a_kind_is_none_and_lengths_must_agree():
    scores = score_calls([[]], [Said([], False)], [TOOLS])
    assert scores.valid_call_rate is None and scores.name_accuracy is None and scores.quiet_when_should_not == 1.0
    with pytest.raises(ValueError, match="2 expected answers, 1 answers"):
        score_calls([[], []], [Said([], False)], [TOOLS, TOOLS])
