"""Evaluation of a trained LoRA run of the tiny model (``tiny_trained_run``; the bench smoke run uses
the real one): through a real TaskRunner (scores equal
a direct computation with rouge_score / sacrebleu over the written predictions, losses equal a
direct teacher-forced computation, the result is stored, Cancel leaves nothing), through the CLI,
and on a run trained with ``val_size`` (its own split rebuilt; the loss equals the trainer's
eval_loss)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from trainer_core.evaluation.schemas import EvaluateRequest
from trainer_core.evaluation.start import start_evaluation
from trainer_core.runs.folders import MARKER
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskPhase
from trainer_core.tasks.store import TaskStore

pytestmark = pytest.mark.slow
ROWS = 10


@pytest.fixture
def tasks(tiny_trained_run):
    store = RunStore(tiny_trained_run.db_path)
    runner = TaskRunner(
        JobRunner(runs_dir=tiny_trained_run.settings.runs_dir, store=store, warm_modules=()), tiny_trained_run.settings
    )
    yield runner
    runner.cancel()
    runner.wait(30)
    store.close()


def _direct_losses(tiny_model_dir: Path, adapter: Path, conversations: list[list[dict]]) -> dict[str, float]:
    """Mean cross-entropy per answer token, row by row with plain transformers + PEFT: the answer
    tokens are those after the prompt's rendering (with the generation prompt) up to and including
    <|im_end|> (the newline after it is not an answer token)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(adapter)
    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), adapter
    ).eval()
    losses = {}
    for name, use_adapter in (("tuned", True), ("base", False)):
        nats, count = 0.0, 0
        for conversation in conversations:
            prompt = tokenizer.apply_chat_template(conversation[:-1], tokenize=False, add_generation_prompt=True)
            full = tokenizer.apply_chat_template(conversation, tokenize=False)
            ids = tokenizer(full, add_special_tokens=False)["input_ids"]
            start, end = (
                len(tokenizer(prompt, add_special_tokens=False)["input_ids"]),
                len(ids) - 1,
            )  # drop the final "\n"
            assert full.endswith("<|im_end|>\n") and len(ids) <= 128  # the run's max_seq_length: nothing cut
            with torch.inference_mode():
                if use_adapter:
                    logits = model(torch.tensor([ids])).logits[0]
                else:
                    with model.disable_adapter():
                        logits = model(torch.tensor([ids])).logits[0]
            targets = torch.tensor(ids[start:end])
            nats += float(torch.nn.functional.cross_entropy(logits[start - 1 : end - 1], targets, reduction="sum"))
            count += end - start
        losses[name] = nats / count
    return losses


def test_evaluation_task_scores_equal_a_direct_computation(tasks, tiny_trained_run, datasets_dir, tiny_model_dir):
    identity = str(datasets_dir / "identity.json")
    record = start_evaluation(
        tasks,
        EvaluateRequest(
            model=tiny_trained_run.job_id, datasets=[identity], max_rows=ROWS, max_new_tokens=8, batch_size=ROWS
        ),
    )
    assert tasks.wait(400), "the evaluation did not finish within 400 s"
    done = tasks.get(record.task_id)
    assert done.phase == TaskPhase.completed, (done.message, done.error)
    assert TaskStore(tiny_trained_run.settings.db_path).get(record.task_id) == done  # stored with its result
    assert [t.task_id for t in tasks.list(tiny_trained_run.job_id, TaskKind.evaluate)][0] == record.task_id
    result, folder = done.result, Path(done.output_dir)
    assert folder == tiny_trained_run.output_dir / "evaluations" / record.task_id
    assert result["rows_evaluated"] == ROWS and result["rows_available"] == 91 and result["source"] == "identity.json"
    table = [
        json.loads(line) for line in (folder / result["predictions_file"]).read_text(encoding="utf-8").splitlines()
    ]
    assert [row["index"] for row in table] == list(range(ROWS))
    source = json.loads(Path(identity).read_text(encoding="utf-8"))[:ROWS]
    assert [row["reference"] for row in table] == [row["output"] for row in source]
    assert [row["prompt"] for row in table] == [row["instruction"] for row in source]
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    refs = [row["reference"] for row in table]
    for side in ("tuned", "base"):
        answers = [row[f"{side}_answer"] for row in table]
        rouge = [scorer.score(ref, answer)["rougeL"].fmeasure for ref, answer in zip(refs, answers)]
        assert [row[f"rouge_l_{side}"] for row in table] == rouge
        scores = result[side]
        assert scores["rouge_l"] == pytest.approx(sum(rouge) / ROWS, abs=1e-12)
        assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(answers, [refs]).score, abs=1e-9)
        assert scores["exact_match"] == sum(a.strip() == r.strip() for a, r in zip(answers, refs)) / ROWS
        assert scores["generated_tokens"] == sum(row[f"{side}_tokens"] for row in table) > 0
    assert [row["tuned_answer"] for row in table] != [row["base_answer"] for row in table]
    conversations = [
        [{"role": "user", "content": r["instruction"]}, {"role": "assistant", "content": r["output"]}] for r in source
    ]
    direct = _direct_losses(tiny_model_dir, tiny_trained_run.output_dir, conversations)
    from trainer_core.models.loading import compute_dtype

    # in fp32 equal to 4 digits; in bf16 (evaluation's dtype on a CPU whose bf16 pays) within 0.1 % of fp32
    rel = 1e-4 if str(compute_dtype("cpu")) == "torch.float32" else 1e-3
    for side in ("tuned", "base"):
        assert result[side]["loss"] == pytest.approx(direct[side], rel=rel)
        assert result[side]["perplexity"] == pytest.approx(math.exp(direct[side]), rel=rel)
    assert result["tuned"]["loss"] < result["base"]["loss"]  # it learned identity.json
    files = json.loads((tiny_trained_run.output_dir / MARKER).read_text())["files"]  # Delete removes them too
    assert f"evaluations/{record.task_id}/predictions.jsonl" in files


def test_cancel_ends_a_running_evaluation_and_leaves_no_folder(tasks, tiny_trained_run, datasets_dir):
    record = start_evaluation(
        tasks,
        EvaluateRequest(
            model=f"{tiny_trained_run.job_id}/checkpoint-2",
            max_rows=64,
            datasets=[str(datasets_dir / "alpaca_en_demo.json")],
            max_new_tokens=512,
            batch_size=4,
        ),
    )
    assert Path(record.output_dir).is_dir()
    deadline = time.monotonic() + 300
    while "tuned:" not in (tasks.get(record.task_id).message or "") and time.monotonic() < deadline:
        time.sleep(0.2)  # until the model is loaded and batches run
    assert tasks.get(record.task_id).phase == TaskPhase.running
    began = time.monotonic()
    assert tasks.cancel(record.task_id)
    assert tasks.wait(30)
    done = tasks.get(record.task_id)
    assert done.phase == TaskPhase.cancelled and done.result is None and time.monotonic() - began < 10
    assert not Path(record.output_dir).exists()
    assert TaskStore(tiny_trained_run.settings.db_path).get(record.task_id).phase == TaskPhase.cancelled


def test_cli_evaluates_a_checkpoint(tiny_trained_run, datasets_dir, tmp_path, capsys):
    from trainer_core.cli import main

    out = tmp_path / "eval"
    code = main(
        [
            "evaluate",
            str(tiny_trained_run.output_dir / "checkpoint-2"),
            "--dataset",
            str(datasets_dir / "identity.json"),
            "--max-rows",
            "2",
            "--max-new-tokens",
            "4",
            "--no-base",
            "--json",
            "--output",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    result = json.loads(printed)
    assert result["rows_evaluated"] == 2 and result["base"] is None and result["tuned"]["loss"] > 0
    assert Path(result["predictions_path"]) == out / "predictions.jsonl"
    assert json.loads((out / "scores.json").read_text())["tuned"] == result["tuned"]


def test_a_val_size_run_is_evaluated_on_its_own_split(tmp_path, tiny_model_dir, datasets_dir):
    """Training holds the val_size rows out as its eval set; evaluation rebuilds the same rows, and
    its loss on them equals the trainer's eval_loss (one eval batch, so the means agree)."""
    from trainer_core.cli.chat import choice_for
    from trainer_core.evaluation.sources import plan_data
    from trainer_core.evaluation.worker import evaluate
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import Settings, get_settings
    from trainer_core.vocabulary import Phase

    settings = Settings(data_dir=tmp_path / "data")
    store = RunStore(settings.db_path)
    runner = JobRunner(runs_dir=settings.runs_dir, store=store, warm_modules=())
    response = runner.start(
        TrainingStartRequest(
            model_name=str(tiny_model_dir),
            local_datasets=[str(datasets_dir / "identity.json")],
            dataset_slice_end=20,
            val_size=0.2,
            max_steps=1,
            eval_steps=1,
            batch_size=4,
            max_seq_length=96,
            learning_rate=1e-3,
        )
    )
    assert runner.wait(600)
    status = runner.status(with_history=False)
    assert status.phase == Phase.completed, status.error
    eval_loss = [m.eval_loss for m in store.get_run(response.job_id).metrics if m.eval_loss is not None][-1]
    choice = choice_for(status.details["output_dir"])
    plan = plan_data(choice, [], None)
    assert "val_size split (0.2 of identity.json" in plan["source"]
    result = evaluate(
        {"max_new_tokens": 1, "compare_base": False},
        {
            "choice": choice.model_dump(),
            "models_dir": str(get_settings().models_dir),
            "output_dir": str(tmp_path),
            "data": plan,
        },
    )
    assert result.rows_evaluated == result.rows_available == 4  # ceil(0.2 x 20)
    assert result.tuned.loss == pytest.approx(eval_loss, rel=1e-4)
    store.close()


def test_evaluate_bench_quick(trained_run, capsys):
    """The bench script runs (figures are reported, not asserted: see bench/evaluate.py)."""
    from bench import evaluate as bench

    report = bench.main(["--quick", "--data-dir", str(trained_run.settings.data_dir), "--eval-rows", "0"])
    assert report["run"] == trained_run.job_id and report["tokens"]["ours"] == report["tokens"]["plain"] > 0
    assert all(r > 0 for r in report["ours_tokens_per_s"] + report["plain_tokens_per_s"])
    assert "vs plain batched generate" in capsys.readouterr().out
