"""A kept row becomes its dataset row in each output format; a row that does not fit is dropped
with the gate that names why."""

from __future__ import annotations

import pytest

from trainer_core.recipes.records import _Dropped, output_row
from trainer_core.recipes.schema import Output

ROW = {
    "chunk": "text",
    "qa": {"question": "Q?", "answer": "A."},
    "talk": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    "score": 3,
}


def test_each_format_gets_its_fields():
    alpaca = Output(format="alpaca", fields={"instruction": "qa.question", "output": "qa.answer"})
    assert output_row(ROW, alpaca) == {"instruction": "Q?", "input": "", "output": "A."}
    messages = Output(format="messages", fields={"messages": "talk.messages"})
    assert output_row(ROW, messages) == {"messages": ROW["talk"]["messages"]}
    pairs = Output(format="embedding_pairs", fields={"anchor": "qa.question", "positive": "chunk"})
    assert output_row(ROW, pairs) == {"anchor": "Q?", "positive": "text"}
    preference = Output(
        format="preference", fields={"prompt": "qa.question", "chosen": "qa.answer", "rejected": "score"}
    )
    assert output_row(ROW, preference)["rejected"] == "3"  # values that are not text are written as JSON


def test_rows_that_do_not_fit_are_dropped_with_why():
    with pytest.raises(_Dropped) as dropped:
        output_row(ROW, Output(format="messages", fields={"messages": "qa"}))
    assert dropped.value.reason == "schema" and "is not a list of {role, content} turns" in dropped.value.detail
    with pytest.raises(_Dropped) as dropped:
        output_row(ROW, Output(format="alpaca", fields={"instruction": "qa.missing", "output": "qa.answer"}))
    assert dropped.value.reason == "expression"


def test_an_expression_that_fails_drops_its_row_not_the_run():
    from trainer_core.recipes.records import _render

    for expr in ("{{ 1 / 0 }}", "{{ qa.missing.deeper }}", "{{ ''.__class__ }}", "{{ qa.question + 1 }}"):
        with pytest.raises(_Dropped) as dropped:
            _render(expr, ROW, "columns.x")
        assert dropped.value.reason == "expression" and dropped.value.detail.startswith("columns.x: ")
