"""Evaluating an embedding model after training (``EMBEDDING.evaluation()``: the Evaluate tab and the
CLI's ``evaluate``, in the evaluation worker): the held-out rows (``data.held_out_rows``: the run's
own ``val_size`` split or evaluation data, or the files given, with the run's ``embedding_columns``
where the files have those columns), scored with the evaluators training uses (``evaluators``:
nDCG@10, MRR@10, recall@1 / @10 for pairs and triplets, Spearman for scored pairs), for the chosen
model and its base (``serve.EmbeddingServer.weights``: the adapter switched off, or a full
fine-tune's base), each loaded with ``loading.load_embedder`` and reading at most the run's
``max_seq_length`` tokens of a text, as in training (the plan's; the model's own limit where lower).

``predictions.jsonl`` holds one object per held-out row: ``index``, the row's texts (``anchor``,
``positive``, ... or ``sentence1``, ``sentence2``, ``score``), and per model (``tuned``, ``base``:
null when not compared) ``rank_<model>`` (pairs, triplets: the position of the row's own positive
among all held-out passages by cosine similarity, 1 = first) and ``cosine_<model>`` (the cosine
similarity of the row's anchor and positive, or of its two sentences).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.errors import DatasetError
from trainer_core.evaluation.kind_result import write_result
from trainer_core.evaluation.report import PREDICTIONS_FILE
from trainer_core.evaluation.schemas import EvaluateRequest, EvaluationResult, Scores
from trainer_core.kinds.embedding.data import Shape, held_out_rows
from trainer_core.kinds.embedding.evaluators import METRICS, build_evaluator
from trainer_core.schemas import TrainingStartRequest

log = logging.getLogger(__name__)
Progress = Callable[[float, str], None]  # (fraction 0..1, message)


def read_rows(plan: dict[str, Any]) -> tuple[Any, Shape]:
    """(the planned held-out rows in sentence-transformers' columns, their shape); raises
    DatasetError naming the file, or for labelled texts (no retrieval metric scores them)."""
    if "files" in plan:
        request = TrainingStartRequest(local_datasets=plan["files"], embedding_columns=plan.get("embedding_columns"))
    else:
        request = TrainingStartRequest.model_validate(plan["run_request"])
    rows, shape = held_out_rows(request)
    if shape == Shape.labelled:
        raise DatasetError(
            f"{plan['source']} holds labelled texts (text, label): retrieval metrics need (anchor, positive) "
            "pairs or scored sentence pairs (sentence1, sentence2, score); give such held-out rows",
            fields=("datasets",),
        )
    if len(rows) == 0:
        raise DatasetError(f"{plan['source']} has no rows to evaluate", fields=("datasets",))
    return rows, shape


def _columns_for(files: list[str], run_request: Optional[TrainingStartRequest]) -> Optional[dict[str, str]]:
    """The run's ``embedding_columns`` where every given file has those columns, else None (the
    files' own column names)."""
    columns = getattr(run_request, "embedding_columns", None)
    if not columns:
        return None
    from trainer_core.data.prepare import raw_sources

    read = raw_sources(TrainingStartRequest(local_datasets=files))
    return columns if all(set(columns.values()) <= set(rows.column_names) for _, rows in read) else None


def _metrics(model: Any, evaluator: Any) -> dict[str, float]:
    """The evaluator's metrics of ``model`` under ``Scores``' names (``ndcg_at_10``, ...)."""
    found = evaluator(model)
    return {
        METRICS[f"eval_{key}"].removeprefix("eval_"): float(v) for key, v in found.items() if f"eval_{key}" in METRICS
    }


def row_values(
    model: Any, rows: Any, shape: Shape, query_prompt: Optional[str], batch_size: int
) -> dict[str, list[float]]:
    """Per held-out row, by cosine similarity: ``rank`` (1 = first) of its own positive among all
    the rows' passages and ``cosine`` of its anchor and positive (pairs, triplets), or ``cosine`` of
    its two sentences (scored)."""
    import torch
    from sentence_transformers.util import cos_sim

    def encode(texts: list[str], prompt: Optional[str] = None) -> Any:  # (N, D)
        return model.encode(texts, prompt=prompt, batch_size=batch_size, convert_to_tensor=True)

    if shape == Shape.scored:
        pairs = torch.nn.functional.cosine_similarity(encode(rows["sentence1"]), encode(rows["sentence2"]))
        return {"cosine": [round(float(v), 6) for v in pairs]}
    ids: dict[str, int] = {}  # passage text -> column of the similarity matrix, as the evaluator's corpus
    for column in (c for c in rows.column_names if c != "anchor"):
        for text in rows[column]:
            ids.setdefault(text, len(ids))
    sims = cos_sim(encode(rows["anchor"], query_prompt), encode(list(ids)))  # (Q, P)
    own = sims[torch.arange(len(rows)), torch.tensor([ids[p] for p in rows["positive"]])]  # (Q,)
    ranks = [int(v) + 1 for v in (sims > own[:, None]).sum(dim=1)]
    return {"rank": ranks, "cosine": [round(float(v), 6) for v in own]}


class EmbeddingEvaluation:
    """The embedding kind's evaluation (``ModelKind.evaluation``'s object)."""

    def plan(self, plan: dict[str, Any], run_request: Optional[TrainingStartRequest]) -> dict[str, Any]:
        """``plan`` with the run's ``embedding_columns`` (files given) and ``query_prompt``, its rows
        read once now (a bad file refused before any model loads; Hub data is left to the worker).
        Raises DatasetError."""
        plan = dict(plan)
        if "files" in plan:
            plan["embedding_columns"] = _columns_for(plan["files"], run_request)
        plan["query_prompt"] = getattr(run_request, "query_prompt", None)
        if "files" in plan or not plan["run_request"].get("hf_dataset"):
            read_rows(plan)
        return plan

    def run(
        self,
        request: dict[str, Any],
        context: dict[str, Any],
        progress: Progress,
        should_stop: Callable[[], bool],
    ) -> Optional[EvaluationResult]:
        """The metrics of the choice (and its base, with ``compare_base``) on the planned rows;
        writes ``predictions.jsonl`` and ``scores.json`` into ``context["output_dir"]``. None when
        stopped. Raises DatasetError, ModelLoadError."""
        from trainer_core.kinds.embedding.serve import EmbeddingServer
        from trainer_core.serving.schemas import ModelChoice

        began, req = time.monotonic(), EvaluateRequest.model_validate(request)
        choice, plan = ModelChoice(**context["choice"]), context["data"]
        progress(0.0, f"Reading {plan['source']}")
        rows, shape = read_rows(plan)
        available = len(rows)
        rows = rows.select(range(min(req.max_rows or available, available)))
        progress(0.02, f"Loading {choice.id}")
        server = EmbeddingServer(choice, Path(context["models_dir"]))
        evaluator = build_evaluator(rows, shape, plan.get("query_prompt"), req.batch_size)
        sides = [("tuned", True)] + ([("base", False)] if req.compare_base and choice.kind != "base" else [])
        scores: dict[str, Scores] = {}
        values: dict[str, dict[str, list[float]]] = {}
        for k, (name, use_adapter) in enumerate(sides):
            if should_stop():
                return None
            progress(0.1 + 0.85 * k / len(sides), f"{name}: embedding {len(rows)} held-out rows")
            with server.weights(use_adapter) as model:
                model.max_seq_length = min(plan["max_seq_length"], model.max_seq_length or plan["max_seq_length"])
                scores[name] = Scores(**_metrics(model, evaluator))
                values[name] = row_values(model, rows, shape, plan.get("query_prompt"), req.batch_size)
        if should_stop():
            return None
        progress(0.97, f"Writing {PREDICTIONS_FILE}")
        keys = list(values["tuned"])  # rank and cosine, or cosine
        table = [
            {
                "index": i,
                **row,
                **{
                    f"{key}_{name}": values[name][key][i] if name in values else None
                    for key in keys
                    for name in ("tuned", "base")
                },
            }
            for i, row in enumerate(rows)
        ]
        return write_result(
            context, table, scores, available=available, began=began, device=server.device, label="embedder"
        )
