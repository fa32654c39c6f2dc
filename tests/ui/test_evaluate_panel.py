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
