"""Tool-call evaluation without a model: glaive rows give one point per assistant turn with its
expected calls, injected answers are parsed and scored, and the scores reach Scores, the report
table and the predictions table."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from trainer_core.data.files import read_file
from trainer_core.data.formats import normalize
from trainer_core.evaluation.generation import Answer, Generated
from trainer_core.evaluation.loss import LossResult
from trainer_core.evaluation.report import Outcome, prediction_rows, score_table
from trainer_core.evaluation.rows import to_rows
from trainer_core.evaluation.scoring import score_answers
from trainer_core.evaluation.tool_calls import expected_calls, score_tool_answers
from trainer_core.vocabulary import FormatType

GLAIVE = "glaive_toolcall_en_demo.json"
GLAIVE_ROWS = [0, 7]  # glaive_toolcall_en_demo.json: 4 assistant turns each, 1 and 2 of them calls
LABELS = ["Valid calls", "Right function", "Arguments exact", "Called when it should", "Quiet when it should not"]


@pytest.fixture(scope="module")
def glaive_rows(datasets_dir: Path) -> list:
    name = "glaive_toolcall_en_demo.json"
    canonical = normalize(read_file(str(datasets_dir / name)), FormatType.sharegpt, name).select(GLAIVE_ROWS)
    rows, skipped = to_rows(canonical, name)
    assert skipped == 0
    return rows


def test_a_row_with_tools_is_scored_at_each_assistant_turn_with_its_calls(glaive_rows) -> None:
    assert [row.index for row in glaive_rows] == [0] * 4 + [1] * 4 and all(row.tools for row in glaive_rows)
    names = [[call["name"] for call in expected_calls(row.reference)] for row in glaive_rows]
    assert names == [[], ["search_recipes"], [], [], ["get_movie_details"], [], ["get_movie_details"], []]
    assert glaive_rows[1].prompt[-1]["role"] == "user" and glaive_rows[2].prompt[-1]["role"] == "tool"
    assert expected_calls(glaive_rows[4].reference)[0]["arguments"] == {"movie_id": "12345"}


def test_scores_come_from_the_parsed_answers(glaive_rows) -> None:
    references = [row.reference for row in glaive_rows]
    perfect = score_tool_answers(references, glaive_rows, "hermes")
    assert perfect is not None
    s = perfect.scores
    assert (s.rows, s.should_call, s.attempted) == (8, 3, 3)
    assert (s.valid_call_rate, s.name_accuracy, s.arguments_exact, s.called_when_should, s.quiet_when_should_not) == (
        1.0, 1.0, 1.0, 1.0, 1.0,
    )  # fmt: skip
    assert perfect.calls[4] == [{"name": "get_movie_details", "arguments": {"movie_id": "12345"}}]
    answers = ["I can't."] * 8
    answers[1] = '<tool_call>\n{"name": "search_recipes", "arguments": {"ingredients": "chicken"}}\n</tool_call>'
    answers[4] = '<tool_call>\n{"name": "get_movie_details", "arguments": {"movie_id": "12345"}}\n</tool_call>'
    answers[6] = '<tool_call>\n{"name": "get_movie_details", "arguments": {"movie_id": '  # begun, cut short
    answers[7] = '<tool_call>\n{"name": "order_food", "arguments": {}}\n</tool_call>'  # should not call; undefined
    s = score_tool_answers(answers, glaive_rows, "hermes").scores
    assert s.attempted == 4 and s.valid_call_rate == 1 / 4  # ingredients must be an array; 6 unparsed; 7 undefined
    assert (s.name_accuracy, s.arguments_exact, s.called_when_should) == (2 / 3, 1 / 3, 1.0)
    assert s.quiet_when_should_not == 4 / 5
    plain = datasets.Dataset.from_dict(
        {"messages": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]]}
    )
    plain_rows, _ = to_rows(plain, "plain.json")
    assert score_tool_answers(["a"], plain_rows, "hermes") is None  # no tools: no tool scores


def test_the_scores_reach_the_table_and_the_predictions(glaive_rows) -> None:
    from ui.evaluate_panel import shown_calls

    answers = [row.reference for row in glaive_rows]
    generated = Generated([Answer(text, 5, "stop") for text in answers], 40, 1.0)
    outcome = Outcome(
        LossResult(nats=12.0, tokens=10),
        generated,
        score_answers(answers, answers),
        score_tool_answers(answers, glaive_rows, "hermes"),
    )
    scores = outcome.scores()
    assert scores.valid_call_rate == 1.0 and scores.quiet_when_should_not == 1.0
    table = {label: (base, tuned) for label, base, tuned, _ in score_table(scores, None)}
    assert all(table[label] == ("-", "1.000") for label in LABELS)
    rows = prediction_rows(glaive_rows, outcome, None)
    assert rows[1]["tuned_calls"][0]["name"] == "search_recipes" and rows[0]["tuned_calls"] == []
    assert rows[1]["base_calls"] is None
    assert shown_calls(rows[4]["tuned_calls"]) == 'get_movie_details({"movie_id": "12345"})'
    assert shown_calls(rows[0]["tuned_calls"]) == "(none)" and shown_calls(None) == ""
    json.dumps(rows)  # predictions.jsonl takes them


def test_the_cli_scores_tool_calls_of_the_tiny_model(tiny_model_dir, datasets_dir, tmp_path, capsys) -> None:
    """The real path (rows, prompts with tools, greedy answers, parsing) on glaive's first row: 3
    points, 1 of them a call. Random weights answer nonsense, so only the counts are known."""
    from trainer_core.cli import main

    data = tmp_path / GLAIVE  # its first row only: reading all 300 costs seconds
    data.write_text(json.dumps(json.loads((datasets_dir / GLAIVE).read_text(encoding="utf-8"))[:1]), encoding="utf-8")
    args = ["evaluate", "base", "--base-model", str(tiny_model_dir), "--dataset", str(data)]
    args += ["--max-rows", "3", "--max-new-tokens", "4", "--no-base", "--output", str(tmp_path / "eval")]
    assert main(args) == 0
    printed = capsys.readouterr().out
    scores = json.loads((tmp_path / "eval" / "scores.json").read_text())["tuned"]
    assert scores["name_accuracy"] in (0.0, 1.0) and scores["quiet_when_should_not"] in (0.0, 0.5, 1.0)
    assert scores["called_when_should"] in (0.0, 1.0)
    for label in LABELS[1:]:  # Valid calls only where the model began a call
        assert any(line.startswith(label) for line in printed.splitlines()), printed
    predictions = [json.loads(line) for line in (tmp_path / "eval" / "predictions.jsonl").open()]
    assert [row["index"] for row in predictions] == [0, 0, 0]
    assert all(isinstance(row["tuned_calls"], list) for row in predictions)


@pytest.mark.parametrize(("template", "fmt"), [(None, "hermes"), ("qwen2.5", "hermes"), ("llama3.1", "llama3")])
def test_answers_are_read_in_the_format_training_wrote(tokenizer, template, fmt) -> None:
    from tests.support.chat_templates import with_template
    from trainer_core.evaluation.tool_calls import answer_format

    assert answer_format(tokenizer if template is None else with_template(tokenizer, template)) == fmt
