"""The divergence rules (``training.divergence``): the measured cases of an exploding full
fine-tune and a LoRA run collapsed to a uniform guess stop the run, naming the step, the rule and
the checkpoint to resume from; healthy loss curves (noisy, rising a little, a tiny model starting
near ln V) never do; and a real worker run at learning_rate 0.999 ends in error, not "completed"."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from trainer_core.training.divergence import DivergenceGuard, LossWatch, last_checkpoint_before
from trainer_core.training.safe_saves import DivergenceError

UNIFORM = math.log(49152)  # 10.80: SmolLM2's vocabulary


def _feed(watch: LossWatch, points):
    for step, (loss, grad) in enumerate(points, start=1):
        fired = watch.see(step, loss, grad)
        if fired:
            return fired
    return None


def test_the_measured_explosion_fires_at_its_first_exploded_step():
    began, what = _feed(LossWatch(49152), [(2.21, 30.0), (130.7, 900.0), (1181.3, 5e4)])
    assert began == 2 and "exploded to 1181" in what and "started at 2.21" in what


def test_the_measured_collapse_fires_after_three_flat_steps():
    points = [(2.3, 5.0), (6.1, 40.0), (10.80, 0.0), (10.80, 0.0), (UNIFORM, 0.0)]
    began, what = _feed(LossWatch(49152), points)
    assert began == 3 and "uniform guess" in what
    assert "exploded" in _feed(LossWatch(None), points)[1]  # preference losses: no collapse rule, still a divergence


@pytest.mark.parametrize(
    "points",
    [
        [(2.0, 1.0), (2.6, 1.2), (1.9, 0.8), (3.5, 2.0), (1.7, 0.9), (2.2, 1.0)],  # noisy but sane
        [(0.4, 0.5), (1.9, 1.0), (0.5, 0.4), (2.1, 1.1), (0.6, 0.3)],  # spikes that do not stay
        [(UNIFORM, 3.0), (UNIFORM - 0.01, 2.5), (UNIFORM - 0.02, 2.0), (UNIFORM - 0.03, 1.5)],  # a tiny random model
        [(0.01, 0.0), (0.05, 0.0), (0.2, 0.0), (0.3, 0.0)],  # near zero, 4x up is still tiny: the margin
    ],
)
def test_healthy_curves_never_fire(points):
    assert _feed(LossWatch(49152), points) is None


def test_the_guard_names_the_checkpoint_to_resume_from(tmp_path):
    for step in (1, 2, 3):
        (tmp_path / f"checkpoint-{step}").mkdir()
    assert last_checkpoint_before(tmp_path, 3) == tmp_path / "checkpoint-2"
    assert last_checkpoint_before(tmp_path, 1) is None
    guard = DivergenceGuard()
    args, model = SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(config=SimpleNamespace(vocab_size=49152))
    for step, loss in ((1, 2.21), (2, 2.0), (3, 130.7)):
        guard.on_log(args, SimpleNamespace(global_step=step), None, logs={"loss": loss, "grad_norm": 1.0}, model=model)
    with pytest.raises(DivergenceError, match=r"step 4: the loss exploded .*checkpoint-2: resume from it"):
        guard.on_log(args, SimpleNamespace(global_step=4), None, logs={"loss": 1181.3, "grad_norm": 1.0}, model=model)


def test_a_real_run_at_learning_rate_0999_ends_in_error(tiny_model_dir, datasets_dir, tmp_path):
    """Full fine-tuning of the tiny model at lr 0.999 without clipping, through the real worker:
    the run ends in error with the rule in its message, in the status and in the run record."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.vocabulary import Phase

    store = RunStore(tmp_path / "studio.db")
    runner = JobRunner(runs_dir=tmp_path / "runs", store=store, warm_modules=())
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        training_type="full",
        learning_rate=0.999,
        max_grad_norm=0,
        max_steps=12,
        save_steps=1,
        batch_size=2,
        max_seq_length=64,
        warmup_steps=0,
    )
    response = runner.start(request)
    assert response.status == "queued" and runner.wait(300)
    status = runner.status()
    said = f"{status.message} {status.error}"
    assert status.phase == Phase.error and "Training diverged at step" in said, said
    assert "exploded" in said or "uniform guess" in said or "is nan" in said
    assert "resume from it" in said  # the checkpoint before the trouble is named
    record = store.get_run(response.job_id)
    assert record.phase == "error" and "Training diverged" in (record.error or record.message or "")
    store.close()
