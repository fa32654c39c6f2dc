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
