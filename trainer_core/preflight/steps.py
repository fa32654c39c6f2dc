"""Optimizer steps of a run, computed as ``transformers.Trainer`` computes them (no trainer built).

Source: ``transformers.Trainer.set_initial_training_values`` (transformers 5.x): the training
dataloader yields ``ceil(rows / per_device_train_batch_size)`` batches (``dataloader_drop_last`` is
False), dealt out to the processes when there are several (``plan_steps``); an epoch is
``max(ceil(batches / gradient_accumulation_steps), 1)`` optimizer steps; the run
is ``max_steps`` when set, else ``ceil(num_train_epochs x steps_per_epoch)``. With ``packing`` the
rows are first packed by TRL's ``pack_dataset`` (``SFTConfig.packing_strategy``, "bfd") into
sequences of at most ``max_seq_length`` tokens, as ``SFTTrainer._prepare_dataset`` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trainer_core.schemas import TrainingStartRequest

PACKING_STRATEGY = "bfd"  # trl.SFTConfig.packing_strategy's default (TRL 1.16); our config keeps it


@dataclass(frozen=True)
class StepPlan:
    """``steps_per_epoch`` and ``total_steps`` (optimizer steps), ``epochs`` run (fractional when
    ``max_steps`` ends mid-epoch), ``global_batch_size`` (rows per optimizer step) and
    ``sequences`` (rows the dataloader sees: packed sequences with packing)."""

    steps_per_epoch: int
    total_steps: int
    epochs: float
    global_batch_size: int
    sequences: int


def plan_steps(sequences: int, request: TrainingStartRequest) -> StepPlan:
    """Steps for ``sequences`` training rows (after the val_size split, dropped rows and packing)
    in ``request.num_processes`` processes. Each process takes ``batch_size`` rows per micro-batch;
    the sampler's ``ceil(sequences / batch_size)`` batches are dealt out to the processes in turn,
    each getting ``ceil(batches / num_processes)`` (accelerate's ``BatchSamplerShard`` with
    ``even_batches``, which repeats the first rows to fill the last round). Zero rows give zero steps."""
    processes = request.world_size  # num_processes on each of num_nodes machines
    global_batch = request.batch_size * request.gradient_accumulation_steps * processes
    if sequences <= 0:
        return StepPlan(0, 0, 0.0, global_batch, 0)
    batches = math.ceil(math.ceil(sequences / request.batch_size) / processes)
    per_epoch = max(math.ceil(batches / request.gradient_accumulation_steps), 1)
    if request.max_steps > 0:
        total, epochs = request.max_steps, request.max_steps / per_epoch
    else:
        total, epochs = math.ceil(request.num_epochs * per_epoch), float(request.num_epochs)
    return StepPlan(per_epoch, total, epochs, global_batch, sequences)


def packed_sequences(tokenized: Any, max_seq_length: int) -> int:
    """How many sequences TRL's ``pack_dataset`` makes of ``tokenized`` (a ``datasets.Dataset`` with
    ``input_ids`` and ``labels``, rows already cut to ``max_seq_length``). Imports TRL (and torch)."""
    from trl.data_utils import pack_dataset

    if len(tokenized) == 0:
        return 0
    packed = pack_dataset(
        tokenized.select_columns(["input_ids", "labels"]), max_seq_length, PACKING_STRATEGY, {"keep_in_memory": True}
    )
    return len(packed)


__all__ = ["PACKING_STRATEGY", "StepPlan", "packed_sequences", "plan_steps"]
