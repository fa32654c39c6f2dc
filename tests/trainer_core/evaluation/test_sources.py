"""Evaluation without a model: rows, scores, val_size splits, the data plan and its refusals
(through ``start_evaluation`` and a real TaskRunner), and the CLI's exit-2 refusals."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import datasets
import pytest
import sacrebleu
from pydantic import ValidationError
from rouge_score import rouge_scorer

from trainer_core.cli import main
from trainer_core.data.files import DatasetError
from trainer_core.data.prepare import eval_conversations, load_conversations, split_validation
from trainer_core.data.prepared import prepare_data
from trainer_core.evaluation.generation import cut_at_stop, left_padded
from trainer_core.evaluation.rows import to_rows
from trainer_core.evaluation.schemas import EvaluateRequest
from trainer_core.evaluation.scoring import score_answers
from trainer_core.evaluation.sources import EvalDataError, plan_data
from trainer_core.evaluation.start import start_evaluation
from trainer_core.evaluation.worker import row_limit
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRefused, TaskRunner


def _conversations(*rows: list[tuple[str, str]]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"messages": [[{"role": r, "content": c} for r, c in row] for row in rows]})


def test_rows_take_the_last_answer_with_the_turns_before_it_as_prompt():
    data = _conversations(
        [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"), ("user", "Name?"), ("assistant", "Ada")],
        [("user", "Only a question")],
        [("user", "2+2?"), ("assistant", "4")],
    )
    rows, skipped = to_rows(data, "f.json")
    assert skipped == 1 and [r.index for r in rows] == [0, 2]
    assert rows[0].reference == "Ada" and [m["content"] for m in rows[0].prompt] == [
        "Be brief.",
        "Hi",
        "Hello",
        "Name?",
    ]
    assert rows[0].prompt_text.splitlines() == ["system: Be brief.", "user: Hi", "assistant: Hello", "user: Name?"]
    assert rows[1].prompt_text == "2+2?" and rows[1].conversation[-1] == {"role": "assistant", "content": "4"}


def test_raw_text_and_answerless_data_are_refused():
    with pytest.raises(DatasetError, match="raw text"):
        to_rows(datasets.Dataset.from_dict({"text": ["a"]}), "c4.jsonl")
    with pytest.raises(DatasetError, match="none of its 1 rows"):
        to_rows(_conversations([("user", "q")]), "q.json")


def test_scores_are_the_libraries_own():
    answers, refs = ["The cat sat on the mat.", " 42 ", "running dogs"], ["A cat sat on a mat.", "42", "the dog runs"]
    scores = score_answers(answers, refs)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    assert scores.rouge_l == [scorer.score(r, a)["rougeL"].fmeasure for a, r in zip(answers, refs)]
    assert scores.rouge_l[2] > 0  # stemming: running/runs ~ run, dogs ~ dog
    assert scores.bleu == sacrebleu.corpus_bleu(answers, [refs]).score
    assert scores.exact == [False, True, False] and scores.exact_match == pytest.approx(1 / 3)


def test_stop_tokens_end_an_answer_and_prompts_pad_on_the_left():
    assert cut_at_stop([5, 6, 2, 2, 2], {2}, 5) == ([5, 6, 2], "stop")
    assert cut_at_stop([5, 6, 7], {2}, 3) == ([5, 6, 7], "length")
    ids, mask = left_padded([[1, 2, 3], [4]], pad_id=0, device="cpu")
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_cpu_evaluates_the_first_50_rows_by_default_and_says_so():
    assert row_limit(None, 999, "cpu") == (50, ["CPU: evaluated the first 50 of 999 rows; set max_rows for more"])
    assert row_limit(None, 999, "cuda") == (999, [])
    assert row_limit(None, 30, "cpu") == (30, [])
    assert row_limit(200, 999, "cpu") == (200, []) and row_limit(5, 3, "cpu") == (3, [])


# ----- val_size -----
def test_val_size_is_a_bounded_data_field_with_a_form_widget(datasets_dir):
    from ui.form import make_widget

    info = TrainingStartRequest.model_fields["val_size"]
    assert info.default == 0 and info.json_schema_extra == {"group": "data"}
    widget = make_widget("val_size")
    assert (widget.minimum, widget.maximum, widget.value) == (0, 0.5, 0.0) and "random_seed" in widget.info
    files = [str(datasets_dir / "identity.json")]
    with pytest.raises(ValidationError, match="less than or equal to 0.5"):
        TrainingStartRequest(local_datasets=files, val_size=0.6)
    for other in ({"local_eval_datasets": files}, {"hf_dataset": "org/data", "eval_split": "test"}):
        with pytest.raises(ValidationError, match="val_size .* and (local_eval_datasets|eval_split) both"):
            TrainingStartRequest(local_datasets=files, val_size=0.1, **other)


def test_val_size_split_is_deterministic_and_becomes_the_eval_set(datasets_dir, tokenizer):
    request = TrainingStartRequest(
        local_datasets=[str(datasets_dir / "identity.json")], val_size=0.1, random_seed=7, max_seq_length=128
    )
    rows, _ = load_conversations(request)
    train, held_out = split_validation(rows, request)
    again = split_validation(rows, request)[1]
    other_seed = split_validation(rows, request.model_copy(update={"random_seed": 8}))[1]
    assert (len(train), len(held_out)) == (81, 10) and held_out["messages"] == again["messages"]
    assert held_out["messages"] != other_seed["messages"]
    assert eval_conversations(request)["messages"] == held_out["messages"]  # what evaluation rebuilds
    as_text = lambda part: Counter(json.dumps(m) for m in part["messages"])  # noqa: E731
    assert as_text(train) + as_text(held_out) == as_text(rows)  # a partition: no held-out row is trained on
    data = prepare_data(request, tokenizer)
    assert data.stats.rows == 81 and data.eval is not None and data.eval_stats.rows == 10


def test_a_val_size_that_leaves_no_training_row_is_refused_at_start(tmp_path):
    from trainer_core.data.prepare import check_local_data

    one = tmp_path / "one.json"
    one.write_text(json.dumps([{"instruction": "q", "output": "a"}]))
    with pytest.raises(DatasetError, match="val_size=0.5 cannot split 1 training rows"):
        check_local_data(TrainingStartRequest(local_datasets=[str(one)], val_size=0.5))


# ----- the data plan and its refusals -----
def _run(tmp_path: Path, **request) -> ModelChoice:
    folder = tmp_path / "runs" / "job-1"
    folder.mkdir(parents=True)
    (folder / "request.json").write_text(json.dumps(TrainingStartRequest(**request).public_dict()))
    return ModelChoice(
        id="job-1", label="job-1", kind="final", base_model="m", path=str(folder), job_id="job-1", adapter=True
    )


def test_named_files_are_confined_present_and_readable(tmp_path, datasets_dir):
    identity = str((datasets_dir / "identity.json").resolve())  # the plan holds resolved paths (CI links ../shared)
    choice = _run(tmp_path, local_datasets=[identity], max_seq_length=256)
    plan = plan_data(choice, [identity], [datasets_dir])
    assert plan == {"files": [identity], "source": "identity.json", "max_seq_length": 256, "vision": False}
    with pytest.raises(EvalDataError, match="datasets: .* is outside the allowed folders"):
        plan_data(choice, [identity], [tmp_path])
    with pytest.raises(EvalDataError, match="datasets: the file .*nope.json was not found"):
        plan_data(choice, [str(datasets_dir / "nope.json")], [datasets_dir])
    with pytest.raises(EvalDataError, match="datasets: c4_demo.jsonl is raw text"):
        plan_data(choice, [str(datasets_dir / "c4_demo.jsonl")], [datasets_dir])


def test_without_files_the_run_uses_its_own_evaluation_data(tmp_path, datasets_dir):
    identity = str((datasets_dir / "identity.json").resolve())
    plan = plan_data(_run(tmp_path / "a", local_datasets=[identity], val_size=0.2, random_seed=3), [], [datasets_dir])
    assert plan["run_request"]["val_size"] == 0.2 and "val_size split (0.2 of identity.json, seed 3)" in plan["source"]
    plan = plan_data(
        _run(tmp_path / "b", local_datasets=[identity], local_eval_datasets=[identity]), [], [datasets_dir]
    )
    assert plan["run_request"]["local_eval_datasets"] == [identity]
    with pytest.raises(EvalDataError, match="trained without evaluation data"):
        plan_data(_run(tmp_path / "c", local_datasets=[identity]), [], [datasets_dir])
    base = ModelChoice(id="base", label="base", kind="base", base_model="m")
    with pytest.raises(EvalDataError, match="base model has no evaluation data of its own"):
        plan_data(base, [], [datasets_dir])


@pytest.fixture
def tasks(tmp_path, datasets_dir):
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(datasets_dir))
    store = RunStore(settings.db_path)
    runner = TaskRunner(JobRunner(runs_dir=settings.runs_dir, store=store, warm_modules=()), settings)
    yield runner
    store.close()


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"model": "job_nope"}, 404, "no such model"),
        ({"model": "base"}, 400, "datasets: the base model has no evaluation data"),
        ({"model": "base", "datasets": ["/etc/passwd"]}, 400, "datasets: /etc/passwd is outside the allowed folders"),
        (
            {"model": "base", "datasets": ["{data}/missing.json"]},
            400,
            "datasets: the file .*missing.json was not found",
        ),
    ],
)
def test_start_refuses_bad_models_and_data(tasks, datasets_dir, body, status, message):
    body = {k: [p.replace("{data}", str(datasets_dir)) for p in v] if k == "datasets" else v for k, v in body.items()}
    with pytest.raises(TaskRefused, match=message) as refused:
        start_evaluation(tasks, EvaluateRequest(**body))
    assert refused.value.status == status and tasks.current() is None and tasks.list() == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["evaluate", "{tmp}/missing"], "is not a folder"),
        (["evaluate", "base"], "datasets: the base model has no evaluation data"),
        (["evaluate", "base", "--dataset", "{tmp}/missing.json"], "datasets: the file .*missing.json was not found"),
        (
            ["evaluate", "base", "--dataset", "{data}/identity.json", "--max-new-tokens", "0"],
            "max_new_tokens: Input should be greater",
        ),
    ],
)
def test_cli_bad_input_exits_2_with_the_reason(tmp_path, datasets_dir, capsys, argv, message):
    import re

    code = main([a.replace("{tmp}", str(tmp_path)).replace("{data}", str(datasets_dir)) for a in argv])
    captured = capsys.readouterr()
    assert code == 2 and re.search(message, captured.err) and captured.out == ""


def test_the_evaluate_panel_runs_on_its_defaults_and_refuses_by_on_screen_labels(tasks):
    """The page sends an emptied optional number box (Max rows) as 0: that is the default (the CPU's
    first rows), not a refusal; a refusal names the boxes on screen, not the API fields."""
    from ui.evaluate_panel import evaluate
    from ui.form import number_widgets

    widgets = number_widgets(EvaluateRequest, ("max_rows", "max_new_tokens", "batch_size"), prefix="eval-")
    assert widgets["max_rows"].minimum is None and widgets["max_new_tokens"].minimum == 1  # no red outline at 0
    (status, *_), *_ = list(evaluate(tasks, "base", None, "", 0, 128, 4, False))
    assert "max_rows" not in status and "Max rows" not in status  # 0 = the default, not out of bounds
    assert "Held-out dataset (the upload or the paths box): the base model has no evaluation data" in status
    assert "datasets" not in status.replace("Held-out dataset", "")
    (status, *_), *_ = list(evaluate(tasks, "base", None, "", 0, 0, 4, False))
    assert "Max new tokens: Input should be greater than or equal to 1" in status


def test_a_long_generation_batch_reports_its_tokens_as_it_goes(tiny_model_dir):
    """A batch's progress moves with its tokens (the evaluation's bar sat at one value for
    minutes while a batch generated): ``on_tokens`` every TOKENS_EVERY new tokens of each batch."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainer_core.evaluation.generation import TOKENS_EVERY, generate_answers
    from trainer_core.models.loading import load_tokenizer

    tokenizer = load_tokenizer(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    prompts = [tokenizer.encode("Who are you?"), tokenizer.encode("Hello")]
    seen: list[tuple[int, int]] = []
    result = generate_answers(
        model, tokenizer, prompts, 32, 1, [], "cpu", on_tokens=lambda batch, new: seen.append((batch, new))
    )
    assert result is not None and [a.tokens for a in result.answers] == [32, 32]  # no stop token: all 32
    assert seen == [(b, n) for b in (1, 2) for n in range(TOKENS_EVERY, 33, TOKENS_EVERY)]
