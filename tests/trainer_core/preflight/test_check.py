"""The pre-flight check (trainer_core.preflight): its numbers against ones computed with the real
SmolLM2 tokenizer directly, per-file drop reasons, sample rendering, steps (against a real
Trainer's ``max_steps``), the rules, and Start's refusal of an all-masked dataset before any model
loads."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from trainer_core.admission.admit import PreflightError, admit
from trainer_core.data.files import DatasetError
from trainer_core.preflight.check import run_preflight
from trainer_core.preflight.steps import plan_steps
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings

MAX_LEN = 64
LONG_PROMPT = "Please read this carefully. " * 30  # ~180 tokens: fills MAX_LEN before the answer
ROWS_A = [
    {"instruction": "Say hi.", "input": "", "output": "Hi!"},
    {"instruction": "Name a colour.", "input": "", "output": "Blue is a colour that many people like a lot."},
    {"instruction": "Write a long answer.", "input": "", "output": "This is a long answer. " * 20},  # truncated
    {"instruction": LONG_PROMPT, "input": "", "output": "Too late."},  # answer beyond MAX_LEN: dropped
]
ROWS_B = [
    {"instruction": "Count to three.", "input": "", "output": "One, two, three."},
    {"instruction": "What is 2+2?", "input": "Answer briefly.", "output": "4"},
]


def _write(folder: Path, name: str, rows: list[dict]) -> str:
    path = folder / name
    path.write_text(json.dumps(rows))
    return str(path)


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allowed_paths=str(tmp_path))


@pytest.fixture()
def files(tmp_path: Path) -> list[str]:
    return [_write(tmp_path, "a.json", ROWS_A), _write(tmp_path, "b.json", ROWS_B)]


def _expected(row: dict, tokenizer) -> tuple[int, int, list[int], int]:
    """(full length, trained tokens within MAX_LEN, ids, prompt length) by the tokenizer directly:
    the answer is every token after the rendered prompt except the final newline after <|im_end|>."""
    user = f"{row['instruction']}\n\n{row['input']}" if row["input"] else row["instruction"]
    messages = [{"role": "user", "content": user}, {"role": "assistant", "content": row["output"]}]
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    prompt = tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    ids = tokenizer(full, add_special_tokens=False)["input_ids"]
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert ids[: len(prompt_ids)] == prompt_ids
    assert ids[-2] == tokenizer.convert_tokens_to_ids("<|im_end|>") and tokenizer.decode(ids[-1:]) == "\n"
    answer_end = len(ids) - 1
    return len(ids), max(0, min(answer_end, MAX_LEN) - len(prompt_ids)), ids, len(prompt_ids)


def test_numbers_match_the_tokenizer(files, settings, tokenizer):
    request = TrainingStartRequest(local_datasets=files, max_seq_length=MAX_LEN, batch_size=2, num_epochs=1)
    report = run_preflight(request, settings, estimates=False)
    expected = [_expected(row, tokenizer) for row in ROWS_A + ROWS_B]
    kept = [(n, t) for n, t, _, _ in expected if t > 0]
    assert report.tokenizer_found and not report.errors
    assert report.rows_read == 6
    assert report.rows_kept == len(kept) == 5 and report.rows_dropped == report.rows_without_trained_tokens == 1
    assert report.rows_truncated == sum(n > MAX_LEN for n, *_ in expected) == 2
    assert report.tokens_cut == sum(max(n - MAX_LEN, 0) for n, *_ in expected)
    assert report.tokens_total == sum(min(n, MAX_LEN) for n, _ in kept)
    assert report.tokens_trained == sum(t for _, t in kept)
    assert report.rows_truncated_share == pytest.approx(2 / 6, abs=1e-4)
    assert sum(report.histogram.counts) == 6 and len(report.histogram.edges) == len(report.histogram.counts) + 1
    assert report.steps_per_epoch == report.total_steps == 3  # ceil(5 kept rows / 2), one epoch


def test_numbers_equal_training_tokenization(files, settings, tokenizer):
    """The check counts what ``tokenize_dataset`` (training's tokenization) counts."""
    from trainer_core.data.prepare import load_conversations
    from trainer_core.data.tokenization import tokenize_dataset

    request = TrainingStartRequest(local_datasets=files, max_seq_length=MAX_LEN)
    report = run_preflight(request, settings, estimates=False)
    _, stats = tokenize_dataset(load_conversations(request)[0], tokenizer, MAX_LEN, True)
    assert (
        report.rows_kept,
        report.tokens_total,
        report.tokens_trained,
        report.rows_truncated,
        report.tokens_cut,
        report.rows_dropped,
    ) == (
        stats.rows,
        stats.total_tokens,
        stats.trained_tokens,
        stats.truncated_rows,
        stats.truncated_tokens,
        stats.dropped_rows,
    )


def test_per_file_drop_reasons(files, settings):
    report = run_preflight(
        TrainingStartRequest(local_datasets=files, max_seq_length=MAX_LEN), settings, estimates=False
    )
    a, b = report.files
    assert (a.name, a.split, a.format, a.rows_read, a.rows_kept, a.rows_dropped) == (
        "a.json",
        "train",
        "alpaca",
        4,
        3,
        1,
    )
    assert a.drop_reasons == {"answer_after_max_seq_length": 1}
    assert (b.name, b.rows_read, b.rows_kept, b.rows_dropped, b.drop_reasons) == ("b.json", 2, 2, 0, {})


def test_eval_files_are_checked(files, settings, tmp_path):
    evals = _write(tmp_path, "eval.json", ROWS_A)
    request = TrainingStartRequest(local_datasets=files[1:], local_eval_datasets=[evals], max_seq_length=MAX_LEN)
    report = run_preflight(request, settings, estimates=False)
    assert [(f.name, f.split) for f in report.files] == [("b.json", "train"), ("eval.json", "eval")]
    assert (report.files[1].rows_read, report.files[1].rows_kept, report.files[1].drop_reasons) == (
        4,
        3,
        {"answer_after_max_seq_length": 1},
    )
    assert report.eval_rows == 3 and report.rows_read == 2
    assert "eval_too_small" in {issue.code for issue in report.warnings}


def test_samples_are_the_training_tokens(files, settings, tokenizer):
    report = run_preflight(
        TrainingStartRequest(local_datasets=files, max_seq_length=MAX_LEN), settings, estimates=False
    )
    assert len(report.samples) == 3
    assert [(s.file, s.row) for s in report.samples] == [
        ("a.json", 1),
        ("a.json", 3),
        ("b.json", 1),
    ]  # firsts + a truncated one
    rows = {("a.json", i + 1): row for i, row in enumerate(ROWS_A)} | {
        ("b.json", i + 1): row for i, row in enumerate(ROWS_B)
    }
    for sample in report.samples:
        n, trained, ids, prompt = _expected(rows[(sample.file, sample.row)], tokenizer)
        shown = ids[:MAX_LEN]
        assert "".join(s.text for s in sample.segments) == tokenizer.decode(shown, skip_special_tokens=False)
        answer = ids[prompt : min(len(ids) - 1, MAX_LEN)]
        assert "".join(s.text for s in sample.segments if s.trained) == tokenizer.decode(
            answer, skip_special_tokens=False
        )
        assert (sample.tokens, sample.trained_tokens, sample.truncated) == (len(shown), trained, n > MAX_LEN)
    assert report.samples[1].truncated


def test_val_size_split_and_slice(files, settings):
    request = TrainingStartRequest(local_datasets=files, max_seq_length=MAX_LEN, val_size=0.34, dataset_slice_start=1)
    report = run_preflight(request, settings, estimates=False)
    assert [f.rows_read for f in report.files] == [3, 2]  # a.json from its row 2
    held = [int(f.notes[-1].split()[0]) for f in report.files]
    assert sum(held) == 2  # ceil(0.34 x 5)
    assert report.rows_read == 5 and report.rows_kept + report.rows_dropped == 3
    assert report.eval_rows <= 2


def test_rules(files, settings):
    request = TrainingStartRequest(local_datasets=files, max_seq_length=MAX_LEN, learning_rate=0.5)
    report = run_preflight(request, settings, estimates=False)
    assert {"rows_truncated", "learning_rate_unusual"} <= {issue.code for issue in report.warnings}
    small_eval = run_preflight(request.model_copy(update={"val_size": 0.2}), settings, estimates=False)
    assert "eval_too_small" in {issue.code for issue in small_eval.warnings}
    truncated = next(i for i in report.warnings if i.code == "rows_truncated")
    assert "set max_seq_length to" in truncated.message and truncated.fields == ["max_seq_length"]
    fine = run_preflight(TrainingStartRequest(local_datasets=files[1:], max_seq_length=512), settings, estimates=False)
    assert not {"rows_truncated", "eval_too_small", "learning_rate_unusual"} & {i.code for i in fine.warnings}
    full = TrainingStartRequest(local_datasets=files[1:], training_type="full", learning_rate=1e-3)
    assert "learning_rate_unusual" in {i.code for i in run_preflight(full, settings, estimates=False).warnings}


def test_missing_tokenizer_counts_rows_only(files, settings, tmp_path):
    model = tmp_path / "no-model"
    model.mkdir()
    report = run_preflight(TrainingStartRequest(local_datasets=files, model_name=str(model)), settings)
    assert not report.tokenizer_found and [w.code for w in report.warnings][:1] == ["tokenizer_not_local"]
    assert (report.rows_read, report.rows_kept, report.tokens_total, report.samples) == (6, 6, 0, [])
    assert report.steps_per_epoch == 2 and report.memory_estimate_gib is None and not report.errors


def test_unreadable_data_is_an_error_in_the_report(tmp_path, settings):
    bad = _write(tmp_path, "bad.json", [{"instruction": "hi", "input": "", "output": ""}])
    report = run_preflight(TrainingStartRequest(local_datasets=[bad]), settings)
    assert [e.code for e in report.errors] == ["data_error"] and "bad.json, row 1" in report.errors[0].message


def _masked_file(tmp_path: Path) -> str:
    return _write(
        tmp_path, "masked.json", [{"instruction": LONG_PROMPT + str(i), "input": "", "output": "ok"} for i in range(3)]
    )


@pytest.fixture()
def no_weights(monkeypatch):
    """Any attempt to load model weights fails the test."""
    import transformers

    from trainer_core.models import loading

    def refuse(*args, **kwargs):
        raise AssertionError("model weights were loaded")

    monkeypatch.setattr(loading, "load_model", refuse)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


def test_all_masked_dataset_is_refused_before_any_model_loads(tmp_path, settings, no_weights):
    request = TrainingStartRequest(
        local_datasets=[_masked_file(tmp_path)], max_seq_length=MAX_LEN, train_on_completions=True
    )
    report = run_preflight(request, settings)
    assert [e.code for e in report.errors] == ["no_trained_tokens"]
    assert report.rows_kept == 0 and report.rows_without_trained_tokens == 3
    assert (
        "training would learn nothing" in report.errors[0].message
        and "raise max_seq_length" in report.errors[0].message
    )
    with pytest.raises(PreflightError) as refused:
        admit(request, settings, None)
    assert str(refused.value) == report.errors[0].message and refused.value.issues == report.errors


def test_assistant_less_rows_are_refused_before_any_model_loads(tmp_path, settings, no_weights):
    path = tmp_path / "users.jsonl"
    path.write_text(
        "\n".join(json.dumps({"messages": [{"role": "user", "content": f"question {i}"}]}) for i in range(3))
    )
    request = TrainingStartRequest(local_datasets=[str(path)], train_on_completions=True)
    with pytest.raises(DatasetError, match="no assistant turn"):
        admit(request, settings, None)
    report = run_preflight(request, settings)
    assert [e.code for e in report.errors] == ["data_error"] and "no assistant turn" in report.errors[0].message


@pytest.mark.parametrize("start,end", [(4, 8), (6, 0), (0, 7)])
def test_slice_beyond_the_data_is_refused_like_training(files, settings, start, end):
    """6 rows in two files: the check and Start refuse a slice past the end in training's words."""
    from trainer_core.data.prepare import load_conversations

    request = TrainingStartRequest(
        local_datasets=files, max_seq_length=MAX_LEN, dataset_slice_start=start, dataset_slice_end=end
    )
    with pytest.raises(DatasetError) as training:
        load_conversations(request)
    assert "reaches beyond the training data, which has 6 rows" in str(training.value)
    report = run_preflight(request, settings)
    assert [e.code for e in report.errors] == ["data_error"] and report.errors[0].message == str(training.value)
    with pytest.raises(DatasetError) as refused:
        admit(request, settings, None)
    assert str(refused.value) == str(training.value)
    inside = run_preflight(request.model_copy(update={"dataset_slice_start": 4, "dataset_slice_end": 6}), settings)
    assert not inside.errors and inside.rows_read == 2


def test_start_admits_good_data(files, settings):
    admitted = admit(TrainingStartRequest(local_datasets=files, max_seq_length=MAX_LEN), settings, None)
    assert admitted.local_datasets == [str(Path(f).resolve()) for f in files]


@pytest.mark.parametrize(
    "rows,batch,accum,epochs,max_steps,expected",
    [
        (37, 4, 1, 1.0, 0, (10, 10, 1.0)),
        (37, 4, 3, 2.5, 0, (4, 10, 2.5)),
        (37, 8, 2, 1.0, 7, (3, 7, 7 / 3)),
        (5, 8, 4, 3.0, 0, (1, 3, 3.0)),
    ],
)
def test_plan_steps(rows, batch, accum, epochs, max_steps, expected):
    request = TrainingStartRequest(
        local_datasets=["x.json"],
        batch_size=batch,
        gradient_accumulation_steps=accum,
        num_epochs=epochs,
        max_steps=max_steps,
    )
    plan = plan_steps(rows, request)
    assert (plan.steps_per_epoch, plan.total_steps, plan.epochs) == pytest.approx(expected)
    assert plan.global_batch_size == batch * accum


def test_alpaca_check_takes_a_few_seconds(datasets_dir, settings):
    request = TrainingStartRequest(local_datasets=[str(datasets_dir / "alpaca_en_demo.json")])
    run_preflight(request, settings, estimates=False)  # tokenizer into memory
    started = time.perf_counter()
    report = run_preflight(request, settings, estimates=False)
    seconds = time.perf_counter() - started
    assert report.rows_read == 999 and report.rows_kept == 999 and report.steps_per_epoch == 250
    assert seconds < 15, f"the check of 999 alpaca rows took {seconds:.1f} s"


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [
        dict(batch_size=3, gradient_accumulation_steps=2, num_epochs=2.0, val_size=0.1),
        dict(batch_size=2, gradient_accumulation_steps=3, num_epochs=1.0, packing=True, max_seq_length=256),
    ],
)
def test_steps_equal_a_real_trainers(extra, datasets_dir, tokenizer, tmp_path, tiny_model_dir):
    """The check's total_steps equals the ``max_steps`` that the trainer training builds (real model,
    LoRA, TRL's packing) computes for its dataloader."""
    from trainer_core.data.prepared import prepare_data
    from trainer_core.models.loading import load_model
    from trainer_core.training.trainer import build_trainer

    values = dict(
        dict(
            max_seq_length=128,
            dataset_slice_end=37,
            local_datasets=[str(datasets_dir / "identity.json")],
            model_name=str(tiny_model_dir),
            eval_steps=1000,
        ),
        **extra,
    )
    request = TrainingStartRequest(**values)
    report = run_preflight(
        request, Settings(data_dir=tmp_path / "d", allowed_paths=str(tiny_model_dir.parent)), estimates=False
    )

    data = prepare_data(request, tokenizer)
    trainer = build_trainer(
        request,
        load_model(tiny_model_dir, request, "cpu"),
        tokenizer,
        data.train,
        data.eval,
        tmp_path / "run",
        "cpu",
        [],
    )
    # Trainer's own step arithmetic (what train() runs on), without training a step:
    max_steps = trainer.set_initial_training_values(trainer.args, trainer.get_train_dataloader())[-1]
    assert report.total_steps == max_steps > 0


def test_a_grpo_check_counts_prompts_and_names_the_completions_and_rewards(tmp_path, settings):
    """A GRPO run's check: the prompts' tokens (its trained tokens are sampled while it trains),
    the completions each step samples and the default reward, in the CLI's text and the page's HTML."""
    from bench.arith_prompts import make_rows
    from trainer_core.cli.check import render
    from ui.preflight_view import report_html

    path = _write(tmp_path, "arith.json", make_rows(10, seed=0))
    request = TrainingStartRequest(local_datasets=[path], training_method="grpo", batch_size=8, max_steps=3)
    report = run_preflight(request, settings, estimates=False)
    assert not report.errors and report.rows_kept == 10 and report.tokens_total > 10 * 10
    assert report.method == (
        "GRPO: 4 answers to each of 2 prompts per step (8 completions of at most 128 tokens, temperature 1); "
        "rewards: numeric_match:answer x 1; KL weight (beta) 0.04"
    )
    words = "all in 10 prompts (the completions sampled while training are what trains)"
    assert f"Tokens: {report.tokens_total} kept, {words};" in render(report, colour=False)
    page = report_html(report)
    assert words in page and "GRPO: 4 answers to each of 2 prompts" in page and "of them trained" not in page


def test_a_grpo_check_with_an_earlier_upload_left_in_says_only_what_is_true(tmp_path, settings, datasets_dir):
    """Identity.json with a prompt / completion file left in the upload list was refused as
    "additions.json is answer data but identity.json is prompt data" (the columns only came in
    another order), and the report also said the model's files and tokenizer were missing. Files of
    the same columns in any order are joined; files whose columns differ are refused naming them,
    and a refused report says why it has no counts or estimates: the data, not the model."""
    from trainer_core.cli.check import render
    from ui.preflight_view import histogram_figure, report_html

    identity = str(datasets_dir / "identity.json")
    additions = _write(tmp_path, "additions.json", [{"prompt": "Who made you?", "completion": "Ada."}] * 3)
    request = TrainingStartRequest(local_datasets=[additions, identity], training_method="grpo", max_steps=2)
    joined = run_preflight(request, settings, estimates=False)
    assert joined.errors == [] and joined.rows_read == 3 + 91 and [f.rows_read for f in joined.files] == [3, 91]
    extra = _write(tmp_path, "additions.json", [{"prompt": "Who made you?", "completion": "Ada.", "lang": "en"}] * 3)
    refused = run_preflight(request.model_copy(update={"local_datasets": [extra, identity]}), settings)
    assert [e.message for e in refused.errors] == [
        "additions.json and identity.json hold prompts with different columns (lang only in additions.json): give "
        "both files the same columns (map them with custom_format_mapping), or train on them in separate runs"
    ]
    assert refused.tokenizer_found and refused.no_estimates == "the data could not be checked (see the error)"
    page, text = report_html(refused), render(refused, colour=False)
    figure = histogram_figure(refused).to_dict()
    assert "No estimates: the data could not be checked (see the error)." in page and "not on this machine" not in page
    assert (
        figure["layout"]["annotations"][0]["text"]
        == "no token counts (the data could not be checked: see the error above)"
    )
    assert "not on this machine" not in text


def test_the_grpo_time_estimate_counts_sampling_as_measured(tmp_path, settings, model_dir):
    """The generation part of a GRPO estimate: at this machine's measured matmul rate (191 GFLOP/s on
    2026-12-06) 10 steps of 8 completions of 32 tokens with LoRA cost what ``model.generate`` took
    there (5.3-5.8 s a step: docs/BENCHMARKS.md, GRPO); longer completions cost proportionally more,
    full fine-tuning (no adapters) less; an SFT run has no generation part."""
    from transformers import AutoConfig

    from bench.arith_prompts import make_rows
    from trainer_core.preflight.generation import generation_seconds

    config = AutoConfig.from_pretrained(model_dir)
    lora = TrainingStartRequest(
        local_datasets=["p.json"], training_method="grpo", batch_size=8, max_completion_length=32
    )
    assert 50 <= generation_seconds(lora, config, 10, "cpu", 191.0) <= 62
    longer = lora.model_copy(update={"max_completion_length": 64})
    assert generation_seconds(longer, config, 10, "cpu", 191.0) > 1.9 * generation_seconds(
        lora, config, 10, "cpu", 191.0
    )
    full = TrainingStartRequest(**{**lora.model_dump(), "training_type": "full"})
    assert generation_seconds(full, config, 10, "cpu", 191.0) < 0.8 * generation_seconds(lora, config, 10, "cpu", 191.0)
    path = _write(tmp_path, "arith.json", make_rows(16, seed=0))
    grpo = run_preflight(TrainingStartRequest(local_datasets=[path], training_method="grpo", max_steps=2), settings)
    assert grpo.time.parts_seconds["generation"] > 0
    sft = run_preflight(
        TrainingStartRequest(local_datasets=[_write(tmp_path, "a.json", ROWS_A)], max_steps=2), settings
    )
    assert sft.time is not None and "generation" not in sft.time.parts_seconds
