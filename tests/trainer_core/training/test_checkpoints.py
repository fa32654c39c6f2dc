"""Early stopping on eval loss: settings and their refusals, the trainer's best checkpoint kept under
its published name and loaded at the end (tiny random Llama, seconds), the job's stop reason, and a
plateau with the real model through the job runner (slow)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import datasets
import pytest
import torch
from pydantic import ValidationError

from tests.conftest import train_to_completion
from tests.trainer_core.training.test_trainer import _model, _rows
from trainer_core.runs.ending import end_reason
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.checkpoints import best_checkpoint
from trainer_core.training.config import build_sft_config
from trainer_core.training.trainer import build_trainer, early_stop_reason
from trainer_core.vocabulary import EndReason, Phase

PLATEAU_LR = 1e-12  # LoRA updates below float32 resolution: eval loss stays put (the real model: within ~1e-7)


def test_patience_without_evaluation_data_is_refused_with_the_fix():
    with pytest.raises(ValidationError, match=r"early_stopping_patience \(3\) needs evaluation data: set val_size"):
        TrainingStartRequest(local_datasets=["a.json"], early_stopping_patience=3)
    for eval_data in (
        {"val_size": 0.1},
        {"local_eval_datasets": ["b.json"]},
        {"hf_dataset": "o/d", "eval_split": "test"},
    ):
        TrainingStartRequest(local_datasets=["a.json"], early_stopping_patience=3, **eval_data)
    with pytest.raises(ValidationError, match="early_stopping_threshold"):
        TrainingStartRequest(local_datasets=["a.json"], early_stopping_threshold=-0.1)


def test_the_fields_carry_their_form_metadata():
    fields = TrainingStartRequest.model_fields
    for name in ("early_stopping_patience", "early_stopping_threshold"):
        assert fields[name].json_schema_extra == {"group": "training"} and fields[name].description


def test_early_stopping_saves_at_every_evaluation_and_keeps_the_best(tmp_path):
    plain = build_sft_config(
        TrainingStartRequest(local_datasets=["a"], val_size=0.1, eval_steps=5), tmp_path, "cpu", True
    )
    assert plain.load_best_model_at_end is False and plain.save_strategy == "no"
    request = TrainingStartRequest(
        local_datasets=["a"], val_size=0.1, eval_steps=5, save_steps=7, early_stopping_patience=2
    )
    args = build_sft_config(request, tmp_path, "cpu", True)
    assert (args.eval_strategy, args.save_strategy, args.eval_steps, args.save_steps) == ("steps", "steps", 5, 5)
    assert args.load_best_model_at_end and args.metric_for_best_model == "eval_loss" and args.greater_is_better is False
    assert args.save_total_limit is None  # no checkpoint (the best included) is rotated away


def test_end_reason_of_an_early_stop():
    assert end_reason(Phase.completed, cancelled=False, early_stopped=True) == EndReason.early_stopped
    assert end_reason(Phase.completed, cancelled=False) == EndReason.completed
    assert end_reason(Phase.stopped, cancelled=True, early_stopped=True) == EndReason.cancelled


def test_no_stop_reason_without_an_early_stop():
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[]), state=None)
    assert early_stop_reason(trainer) is None


def _tiny(tokenizer, out, **fields):
    fields = {
        "max_steps": 10,
        "eval_steps": 1,
        "batch_size": 2,
        "max_seq_length": 64,
        "val_size": 0.1,
        "early_stopping_patience": 2,
        "learning_rate": PLATEAU_LR,
        **fields,
    }
    request = TrainingStartRequest(local_datasets=["x.json"], **fields)
    rows = datasets.Dataset.from_list(_rows())
    return build_trainer(request, _model("sdpa").train(), tokenizer, rows, rows, out, "cpu", [])


def test_a_plateau_stops_early_and_the_best_checkpoint_is_kept_published_and_loaded(tokenizer, tmp_path):
    trainer = _tiny(tokenizer, tmp_path)
    trainer.train()
    state = trainer.state
    # eval 1 sets the best, evals 2 and 3 do not improve: patience 2 ends the run at step 3 of 10
    assert state.global_step == 3 and state.best_global_step == 1
    assert [h["eval_loss"] for h in state.log_history if "eval_loss" in h] == [state.best_metric] * 3
    assert state.best_model_checkpoint == str(tmp_path / "checkpoint-1")
    for step in (1, 2, 3):  # every evaluation saved, none rotated away, no staging folder left
        saved = json.loads((tmp_path / f"checkpoint-{step}" / "trainer_state.json").read_text())
        assert saved["best_model_checkpoint"] == str(tmp_path / "checkpoint-1")
    assert not list(tmp_path.glob(".partial-*"))
    assert best_checkpoint(tmp_path) == (tmp_path / "checkpoint-1", pytest.approx(state.best_metric))
    reason = early_stop_reason(trainer)
    assert reason == (
        f"Stopped early at step 3: eval_loss did not improve by more than 0.0 for 2 evaluations "
        f"(best {state.best_metric:.4f} at step 1)"
    )


def test_the_best_checkpoint_moves_only_on_an_improvement_beyond_the_threshold(tokenizer, tmp_path):
    trainer = _tiny(tokenizer, tmp_path, early_stopping_threshold=0.01)
    trainer.state.global_step = 1
    assert trainer._determine_best_metric({"eval_loss": 2.5}, None) and trainer.state.best_global_step == 1
    trainer.state.global_step = 2
    assert not trainer._determine_best_metric({"eval_loss": 2.495}, None)  # within the threshold: not better
    assert (trainer.state.best_metric, trainer.state.best_global_step) == (2.5, 1)
    trainer.state.global_step = 3
    assert trainer._determine_best_metric({"eval_loss": 2.48}, None) and trainer.state.best_global_step == 3


def test_the_final_weights_are_the_best_checkpoints(tokenizer, tmp_path):
    from safetensors.torch import load_file

    # A high rate makes eval loss rise after the first step: the best is step 1, the final save must equal it.
    # (With LoRA dropout 0.05, the trajectory this scenario was built on.)
    trainer = _tiny(tokenizer, tmp_path, learning_rate=0.5, lr_scheduler_type="constant", lora_dropout=0.05)
    trainer.train()
    trainer.save_final(tmp_path)
    best = trainer.state.best_global_step
    assert trainer.state.global_step > best and early_stop_reason(trainer) is not None
    final = load_file(tmp_path / "adapter_model.safetensors")
    kept = load_file(tmp_path / f"checkpoint-{best}" / "adapter_model.safetensors")
    last = load_file(tmp_path / f"checkpoint-{trainer.state.global_step}" / "adapter_model.safetensors")
    assert final.keys() == kept.keys()
    assert all(torch.equal(final[k], kept[k]) for k in final)
    assert any(not torch.equal(final[k], last[k]) for k in final)


@pytest.mark.slow
def test_a_plateau_stops_a_real_run_early(tmp_path, tiny_model_dir, datasets_dir):
    from trainer_core.runs.store import RunStore

    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        dataset_slice_end=24,
        val_size=0.1,
        batch_size=2,
        max_seq_length=64,
        max_steps=20,
        eval_steps=1,
        early_stopping_patience=2,
        early_stopping_threshold=0.001,
        learning_rate=PLATEAU_LR,
    )
    status, job_id, output = train_to_completion(tmp_path / "runs", tmp_path / "studio.db", request)
    assert status.details["end_reason"] == "early_stopped"
    # The real model's eval loss moves by float noise (~1e-7) even at this rate: the threshold ignores it.
    assert status.message.startswith(
        "Stopped early at step 3: eval_loss did not improve by more than 0.001 for 2 evaluations (best "
    )
    assert status.details["stop_reason"] in status.message and "at step 1)" in status.message
    assert status.metric_history.eval_steps == [1, 2, 3] and max(status.metric_history.steps) == 3
    assert status.details["best_checkpoint"] == str(output / "checkpoint-1")
    assert (output / "checkpoint-1" / "adapter_model.safetensors").is_file()
    record = RunStore(tmp_path / "studio.db").get_run(job_id)
    assert record.end_reason == EndReason.early_stopped and record.best_checkpoint == str(output / "checkpoint-1")
    assert record.best_eval_loss == pytest.approx(status.metric_history.eval_loss[0])
    manifest = json.loads((output / "run.json").read_text())
    assert manifest["end_reason"] == "early_stopped" and manifest["best_checkpoint"] == str(output / "checkpoint-1")
