"""The room a structured answer needs: the longest compact JSON a bounded schema allows (checked
against json.dumps of that longest value), None where the schema does not bound it."""

from __future__ import annotations

import json

import yaml

from trainer_core.recipes.answer_size import ROOM_TOKENS, TOKENS_PER_CHAR, answer_tokens, json_chars
from trainer_core.recipes.columns import LLMJudgeColumn
from trainer_core.recipes.library import template_text

QA = {
    "type": "object",
    "properties": {"evidence": {"type": "string", "maxLength": 5}, "n": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["evidence", "n", "ok"],
    "additionalProperties": False,
}


def test_the_longest_answer_fits_its_bound():
    longest = {"evidence": "x" * 5, "n": -1.2345678901234567e-308, "ok": False}
    assert json_chars(QA) >= len(json.dumps(longest))
    assert json_chars({"type": "array", "items": {"enum": ["a", "bcd"]}, "maxItems": 3}) >= len(json.dumps(["bcd"] * 3))
    assert answer_tokens(QA) == TOKENS_PER_CHAR * json_chars(QA) + ROOM_TOKENS


def test_unbounded_schemas_have_no_bound():
    assert json_chars({"type": "string"}) is None  # no maxLength
    assert json_chars({**QA, "additionalProperties": True}) is None  # any other key may come
    assert json_chars({"type": "array", "items": {"type": "integer"}}) is None  # no maxItems
    assert answer_tokens({"anyOf": [{"type": "null"}, {"type": "string"}]}) is None


def test_the_qa_template_and_a_judge_are_bounded():
    columns = {c["name"]: c for c in yaml.safe_load(template_text("qa_from_documents"))["columns"]}
    assert 600 < answer_tokens(columns["qa"]["output_format"]) < 4000
    judge = LLMJudgeColumn(**{k: v for k, v in columns["quality"].items() if k != "column_type"})
    assert answer_tokens(judge.schema()) is not None
