"""The Evaluate panel's report of a finished evaluation: one table metric | base | tuned | change
(``evaluation.report.score_table``) with the rows either model has, and the predictions file's
rows (an embedding model's ranks where there are no answers)."""

from __future__ import annotations

import json

from trainer_core.evaluation.report import score_table
from trainer_core.evaluation.schemas import Scores
from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from ui.evaluate_panel import predictions_table, scores_text


def _record(result: dict, folder=None) -> TaskRecord:
    return TaskRecord(
        task_id="t1",
        kind=TaskKind.evaluate,
        model="job",
        phase=TaskPhase.completed,
        result=result,
        output_dir=str(folder) if folder else None,
    )


def test_an_embedding_evaluation_shows_its_retrieval_rows_with_the_change(tmp_path):
    tuned = {"ndcg_at_10": 0.75, "mrr_at_10": 0.7, "recall_at_1": 0.5, "recall_at_10": 1.0}
    base = {"ndcg_at_10": 0.5, "mrr_at_10": 0.45, "recall_at_1": 0.25, "recall_at_10": 1.0}
    result = {"rows_evaluated": 4, "rows_available": 4, "seconds": 2.0, "tuned": tuned, "base": base}
    (tmp_path / "predictions.jsonl").write_text(
        json.dumps(
            {
                "index": 0,
                "anchor": "q",
                "positive": "p",
                "rank_tuned": 1,
                "rank_base": 3,
                "cosine_tuned": 0.9,
                "cosine_base": 0.5,
            }
        )
        + "\n"
    )
    lines = scores_text(_record(result)).splitlines()
    assert lines[0] == "4 of 4 rows evaluated in 2 s"
    assert lines[2:] == [
        "| metric | base | tuned | change |",
        "|---|---|---|---|",
        "| nDCG@10 | 0.5000 | 0.7500 | +0.2500 |",
        "| MRR@10 | 0.4500 | 0.7000 | +0.2500 |",
        "| recall@1 | 0.2500 | 0.5000 | +0.2500 |",
        "| recall@10 | 1.0000 | 1.0000 | +0.0000 |",
    ]
    frame = predictions_table(_record(result, tmp_path))
    assert list(frame.columns) == ["anchor", "positive", "rank_tuned", "rank_base", "cosine_tuned", "cosine_base"]
    assert frame.iloc[0].tolist() == ["q", "p", 1, 3, 0.9, 0.5]


def test_a_text_evaluation_without_base_shows_dashes():
    rows = score_table(Scores(loss=1.5, perplexity=4.4817, rouge_l=0.25, exact_match=0.0), None)
    assert rows == [
        ("loss", "-", "1.5000", "-"),
        ("perplexity", "-", "4.482", "-"),
        ("ROUGE-L F1", "-", "0.2500", "-"),
        ("exact match", "-", "0.000", "-"),
    ]


def test_a_tool_evaluation_shows_the_call_scores_and_each_answers_calls(tmp_path):
    tuned = {"rouge_l": 0.5, "valid_call_rate": 0.5, "name_accuracy": 1.0, "arguments_exact": 0.0}
    tuned |= {"called_when_should": 1.0, "quiet_when_should_not": 0.75}
    base = {"rouge_l": 0.25, "valid_call_rate": None, "name_accuracy": 0.0, "arguments_exact": 0.0}
    base |= {"called_when_should": 0.0, "quiet_when_should_not": 1.0}
    result = {"rows_evaluated": 2, "rows_available": 2, "seconds": 1.0, "tuned": tuned, "base": base}
    text = scores_text(_record(result))
    assert "| Valid calls | - | 0.500 | - |" in text and "| Right function | 0.000 | 1.000 | +1.000 |" in text
    assert "| Quiet when it should not | 1.000 | 0.750 | -0.250 |" in text
    call = {"name": "get_weather", "arguments": {"city": "Paris"}}
    lines = [{"prompt": "q", "reference": "r", "tuned_answer": "t", "base_answer": "b"} for _ in range(2)]
    lines[0] |= {"tuned_calls": [call], "base_calls": []}
    lines[1] |= {"tuned_calls": None, "base_calls": None}  # a row without tools
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    frame = predictions_table(_record(result, tmp_path))
    assert frame["tuned_calls"].tolist() == ['get_weather({"city": "Paris"})', ""]
    assert frame["base_calls"].tolist() == ["(none)", ""]
    from ui.run_handlers import _eval_text  # the Runs table's evaluation column

    assert _eval_text(result) == "ROUGE-L 0.500 · valid calls 0.50"
