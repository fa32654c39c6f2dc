"""Evaluating an embedding run after training (``EMBEDDING.evaluation()``) through the evaluation's
own doors: ``sources.plan_data`` + ``worker.evaluate`` (the task worker's code, in process) and the
CLI's ``evaluate``. The run: the tiny encoder, LoRA, 4 steps on 48 Alpaca pairs with a 25 % held-out
split, trained by the worker's ``train()``."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path

import pytest

from trainer_core.cli.chat import choice_for
from trainer_core.cli.main import main
from trainer_core.evaluation.report import PREDICTIONS_FILE, SCORES_FILE
from trainer_core.evaluation.sources import EvalDataError, plan_data
from trainer_core.evaluation.worker import evaluate
from trainer_core.kinds.embedding.evaluation import EmbeddingEvaluation
from trainer_core.model_kind import kind_named
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.worker import train

RETRIEVAL = ("ndcg_at_10", "mrr_at_10", "recall_at_1", "recall_at_10")


@pytest.fixture(scope="module")
def run(tiny_encoder_dir, datasets_dir, tmp_path_factory) -> Path:
    request = TrainingStartRequest(
        model_name=str(tiny_encoder_dir),
        local_datasets=[str(datasets_dir / "alpaca_en_demo.json")],
        embedding_columns={"anchor": "instruction", "positive": "output"},
        dataset_slice_end=48,
        batch_size=8,
        max_seq_length=48,
        learning_rate=5e-3,
        mixed_precision="no",
        max_steps=4,
        val_size=0.25,
        eval_steps=4,
    )
    out = tmp_path_factory.mktemp("embed-eval") / "run"
    assert train(request, "job-ev", out, queue.Queue(), threading.Event()) == ("completed", None)
    (out / "request.json").write_text(json.dumps(request.public_dict()), encoding="utf-8")  # as the runner does
    return out


def _context(choice, plan, tmp_path: Path) -> dict:
    return {"choice": choice.model_dump(), "models_dir": str(tmp_path), "output_dir": str(tmp_path), "data": plan}


def test_a_run_is_scored_beside_its_base_on_its_own_held_out_split(run, tmp_path):
    choice = choice_for(str(run))
    plan = plan_data(choice, [], None)
    assert plan["kind"] == "embedding" and "val_size split (0.25 of alpaca_en_demo.json" in plan["source"]
    assert isinstance(kind_named(plan["kind"]).evaluation(), EmbeddingEvaluation)
    result = evaluate({"model": choice.id, "batch_size": 16}, _context(choice, plan, tmp_path))
    assert (result.rows_evaluated, result.rows_available) == (12, 12)  # 25 % of 48 pairs
    for side in (result.tuned, result.base):
        assert all(0.0 <= getattr(side, name) <= 1.0 for name in RETRIEVAL)
        assert side.recall_at_10 >= side.recall_at_1 and side.loss is None and side.spearman is None
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = [row for row in logged if row.get("eval_ndcg_at_10") is not None][-1]  # training's own evaluation
    assert result.tuned.ndcg_at_10 == pytest.approx(last["eval_ndcg_at_10"], abs=1e-3)
    rows = [json.loads(line) for line in (tmp_path / PREDICTIONS_FILE).read_text().splitlines()]
    assert len(rows) == 12 and {"anchor", "positive", "rank_tuned", "rank_base", "cosine_tuned"} <= set(rows[0])
    assert sum(r["rank_tuned"] == 1 for r in rows) / 12 == pytest.approx(result.tuned.recall_at_1)
    assert sum(r["rank_base"] == 1 for r in rows) / 12 == pytest.approx(result.base.recall_at_1)
    # the adapter is on for tuned, off for base (on 12 rows the rank-based metrics may tie; the cosines differ)
    assert max(abs(r["cosine_tuned"] - r["cosine_base"]) for r in rows) > 1e-4
    assert json.loads((tmp_path / SCORES_FILE).read_text())["tuned"]["ndcg_at_10"] == result.tuned.ndcg_at_10


def test_scored_pairs_give_spearman_and_max_rows_cuts(run, tmp_path):
    scored = tmp_path / "scored.jsonl"
    pairs = [("a cat sits", "a cat is sitting", 0.9), ("a cat sits", "stocks fell today", 0.1)] * 3
    scored.write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "score": s}) + "\n" for a, b, s in pairs))
    choice = choice_for(str(run))
    plan = plan_data(choice, [str(scored)], None)
    result = evaluate({"model": choice.id, "max_rows": 4, "compare_base": False}, _context(choice, plan, tmp_path))
    assert (result.rows_evaluated, result.rows_available, result.base) == (4, 6, None)
    assert -1.0 <= result.tuned.spearman <= 1.0 and result.tuned.ndcg_at_10 is None
    rows = [json.loads(line) for line in (tmp_path / PREDICTIONS_FILE).read_text().splitlines()]
    assert [r["cosine_base"] for r in rows] == [None] * 4 and -1 <= rows[0]["cosine_tuned"] <= 1


def test_the_cli_prints_metric_base_tuned_change(run, tmp_path, capsys):
    assert main(["evaluate", str(run), "--output", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("12 of 12 rows of the run's val_size split")
    assert lines[1].split() == ["metric", "base", "tuned", "change"]
    table = {line.split()[0]: line.split()[1:] for line in lines[2:6]}
    assert list(table) == ["nDCG@10", "MRR@10", "recall@1", "recall@10"]
    base, tuned, change = (float(v) for v in table["nDCG@10"])
    assert 0 <= base <= 1 and 0 <= tuned <= 1 and change == pytest.approx(tuned - base, abs=2e-4)
    assert (tmp_path / "out" / PREDICTIONS_FILE).is_file()


def test_data_that_makes_no_retrieval_rows_is_refused_naming_the_file(run, datasets_dir, tmp_path, capsys):
    preference = datasets_dir / "dpo_en_demo.json"
    assert main(["evaluate", str(run), "--dataset", str(preference)]) == 2
    err = capsys.readouterr().err
    assert "error: datasets: dpo_en_demo.json is a text generator's data (columns conversations)" in err
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text,label\na cat,0\na dog,1\n")
    with pytest.raises(EvalDataError, match=r"datasets: labelled.csv holds labelled texts") as refused:
        plan_data(choice_for(str(run)), [str(labelled)], None)
    assert refused.value.fields == ("datasets",)
    assert not (run / "evaluations").exists() or all(any(p.iterdir()) for p in (run / "evaluations").iterdir())
