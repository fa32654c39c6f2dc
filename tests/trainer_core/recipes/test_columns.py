"""Columns: templates parse and render in a sandbox, samplers draw repeatably within their
parameters, judge columns carry their schema, structured columns need a JSON schema and copy a
property from the row's sentences (copy_from)."""

from __future__ import annotations

import random

import pytest
from jinja2.exceptions import SecurityError

from trainer_core.recipes.columns import (
    ExpressionColumn,
    LLMJudgeColumn,
    LLMStructuredColumn,
    SamplerColumn,
    lookup,
    names_used,
    sentences,
    template,
)


def test_expressions_render_over_the_row_and_the_sandbox_holds():
    column = ExpressionColumn(name="q", expr="{{ qa.question | upper }} ({{ topic }})")
    assert template(column.expr).render(qa={"question": "why"}, topic="tea") == "WHY (tea)"
    assert names_used(column.expr) == {"qa", "topic"}
    with pytest.raises(SecurityError):
        template("{{ ''.__class__.__mro__ }}").render()
    with pytest.raises(ValueError, match=r"columns.bad: the template does not parse \(line 1"):
        ExpressionColumn(name="bad", expr="{{ unclosed")


def test_samplers_draw_from_their_values_repeatably():
    sampler = SamplerColumn(name="kind", sampler_type="category", params={"values": ["a", "b"], "weights": [0, 1]})
    assert {sampler.sample(random.Random(i)) for i in range(20)} == {"b"}
    uniform = SamplerColumn(name="t", sampler_type="uniform", params={"low": 0.1, "high": 0.2})
    draws = [uniform.sample(random.Random("0:1")) for _ in range(2)]
    assert draws[0] == draws[1] and 0.1 <= draws[0] <= 0.2
    for params in ({"values": []}, {"values": ["a"], "weights": [1, 2]}):
        with pytest.raises(ValueError, match="columns.kind.params"):
            SamplerColumn(name="kind", sampler_type="category", params=params)
    with pytest.raises(ValueError, match="'low' < 'high'"):
        SamplerColumn(name="t", sampler_type="uniform", params={"low": 1, "high": 1})


def test_judge_schema_and_rubric_and_structured_schema_checked():
    judge = LLMJudgeColumn(
        name="quality",
        prompt="{{ answer }}",
        scores=[{"name": "helpful", "description": "Does it help?", "options": {1: "no", 3: "yes"}}],
    )
    schema = judge.schema()
    assert schema["required"] == ["helpful"] and schema["properties"]["helpful"]["properties"]["score"]["enum"] == [
        1,
        3,
    ]
    assert "- helpful: Does it help? (1: no; 3: yes)" in judge.rubric()
    with pytest.raises(ValueError, match="output_format is not a JSON schema"):
        LLMStructuredColumn(name="x", prompt="p", output_format={"type": "nonsense"})
    with pytest.raises(ValueError, match="is not a column name"):
        ExpressionColumn(name="two words", expr="x")


def test_lookup_follows_dotted_paths():
    assert lookup({"qa": {"evidence": "e"}}, "qa.evidence") == "e"
    with pytest.raises(KeyError):
        lookup({"qa": "text"}, "qa.evidence")


def test_copy_from_limits_a_property_to_the_texts_sentences():
    column = LLMStructuredColumn(
        name="qa",
        prompt="{{ chunk }}",
        copy_from={"evidence": "chunk"},
        output_format={
            "type": "object",
            "properties": {"evidence": {"type": "string", "minLength": 12, "maxLength": 40}, "q": {"type": "string"}},
        },
    )
    chunk = "Whisk the  eggs well.\nAdd milk. Pour the batter into a hot pan! Then wait until the edges of the crepe turn golden brown. "
    chunk += "Whisk the eggs well."  # once only; "Add milk." too short, the third too long
    assert sentences(chunk, 12, 40) == ["Whisk the eggs well.", "Pour the batter into a hot pan!"]
    schema = column.schema_for({"chunk": chunk})
    assert schema["properties"]["evidence"]["enum"] == sentences(chunk, 12, 40)
    assert "enum" not in column.schema()["properties"]["evidence"]  # what the answer is checked against
    assert column.schema_for({"chunk": "Too short."}) == column.schema()  # nothing fits: left as it is
    with pytest.raises(ValueError, match=r"columns.qa.copy_from: q2 is not a string property of output_format"):
        LLMStructuredColumn(name="qa", prompt="p", copy_from={"q2": "chunk"}, output_format=column.output_format)
