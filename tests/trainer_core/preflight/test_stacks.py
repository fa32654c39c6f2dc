"""The stacks' memory and FLOP counts (``preflight.stacks.Stack``): what gradient checkpointing
keeps, and a part no gradient reaches (forward FLOPs only, nothing saved)."""

from __future__ import annotations

from trainer_core.preflight.stacks import Stack


def test_checkpointing_keeps_each_layer_input_and_one_layer_and_a_frozen_part_keeps_nothing():
    stack = Stack("s", layers=4, hidden=10, positions=3, saved=100, once=7, matmul=1000, attention=50)
    assert stack.saved_values(False) == 3 * (4 * 100 + 7)
    assert stack.saved_values(True) == 3 * (4 * 10 + 100 + 7)
    assert stack.flops(full=False) == 3 * (4 * 1000 + 12 * 50)
    assert stack.flops(full=True) == 3 * (6 * 1000 + 12 * 50)
    assert stack.flops(full=True, training=False) == 3 * (2 * 1000 + 4 * 50)
    frozen = Stack("codec", 1, 0, 3, saved=100, matmul=1000, grad=False)
    assert frozen.saved_values(False) == 0 and frozen.flops(full=True) == 3 * 2 * 1000


def test_the_time_estimate_grows_with_the_steps_and_the_evaluations_run_forward_only():
    from trainer_core.preflight.stack_costs import time_estimate
    from trainer_core.preflight.stacks import ModelCounts
    from trainer_core.preflight.steps import StepPlan
    from trainer_core.schemas import TrainingStartRequest

    request = TrainingStartRequest(model_name="m", local_datasets=["d.jsonl"], save_steps=0)
    counts = ModelCounts(total=10_000, trainable=100, adapters=100, factored=50, quantized=0)
    epoch = [Stack("s", layers=2, hidden=8, positions=10**8, saved=10, matmul=10**4, attention=20)]

    def estimate(steps: int, evaluations: int):
        plan = StepPlan(steps_per_epoch=10, total_steps=steps, epochs=steps / 10, global_batch_size=2, sequences=20)
        return time_estimate(request, counts, epoch, 1000, plan, epoch, evaluations, "cpu", 0.0).parts_seconds

    one, two = estimate(10, 0), estimate(20, 0)
    assert two["train_steps"] > 0 and abs(two["train_steps"] - 2 * one["train_steps"]) <= 0.11
    assert one["evaluation"] == 0 and estimate(10, 3)["evaluation"] > 0
