"""Evaluation during an embedding run: sentence-transformers' evaluators on the held-out rows
(``InformationRetrievalEvaluator`` for pairs and triplets: each anchor a query, every positive and
negative a passage, its own positive the relevant one; ``EmbeddingSimilarityEvaluator`` for scored
pairs), and their metrics under the names the progress events carry (``status.EVAL_METRICS``)."""

from __future__ import annotations

from typing import Any, Optional

from trainer_core.kinds.embedding.data import Shape

METRICS = {  # sentence-transformers' key (cosine similarity) -> TrainingProgress's field
    "eval_cosine_ndcg@10": "eval_ndcg_at_10",
    "eval_cosine_mrr@10": "eval_mrr_at_10",
    "eval_cosine_recall@1": "eval_recall_at_1",
    "eval_cosine_recall@10": "eval_recall_at_10",
    "eval_spearman_cosine": "eval_spearman",
}


def build_evaluator(rows: Any, shape: Shape, query_prompt: Optional[str], batch_size: int) -> Any:
    """The evaluator of held-out ``rows`` (sentence-transformers' columns) of ``shape``, or None
    (no rows, or labelled texts: their loss alone is evaluated). ``query_prompt`` goes before each
    query; ``batch_size``: texts embedded at once."""
    from sentence_transformers.sentence_transformer import evaluation
    from sentence_transformers.util import cos_sim

    if rows is None or len(rows) == 0:
        return None
    if shape == Shape.scored:
        return evaluation.EmbeddingSimilarityEvaluator(
            rows["sentence1"],
            rows["sentence2"],
            rows["score"],
            batch_size=batch_size,
            similarity_fn_names=["cosine"],
            write_csv=False,
        )
    if shape == Shape.labelled:
        return None
    passages = [column for column in rows.column_names if column != "anchor"]
    ids: dict[str, str] = {}  # passage text -> id (a passage given twice is one passage)
    for column in passages:
        for text in rows[column]:
            ids.setdefault(text, f"d{len(ids)}")
    corpus = {doc_id: text for text, doc_id in ids.items()}
    queries = {f"q{i}": anchor for i, anchor in enumerate(rows["anchor"])}
    relevant = {f"q{i}": {ids[positive]} for i, positive in enumerate(rows["positive"])}
    return evaluation.InformationRetrievalEvaluator(
        queries,
        corpus,
        relevant,
        mrr_at_k=[10],
        ndcg_at_k=[10],
        accuracy_at_k=[1, 10],
        precision_recall_at_k=[1, 10],
        map_at_k=[10],
        batch_size=batch_size,
        write_csv=False,
        score_functions={"cosine": cos_sim},
        query_prompt=query_prompt,
    )


def progress_metrics(logs: dict[str, float]) -> dict[str, float]:
    """``logs`` plus each evaluator metric again under its ``METRICS`` name (e.g. ``eval_ndcg_at_10``)."""
    named = {METRICS[key]: value for key, value in logs.items() if key in METRICS}
    return {**logs, **named} if named else logs
