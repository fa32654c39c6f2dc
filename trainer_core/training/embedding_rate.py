"""``embedding_learning_rate``: the trained embeddings and LM head learn at their own rate.

When a run trains the embeddings (listed in ``modules_to_save`` with LoRA, or full fine-tuning),
a rate several times below the rest keeps the new tokens from wrecking the old ones (Unsloth's
continued-pretraining recipe: ``embedding_learning_rate`` 2-10x under ``learning_rate``). The
optimizer transformers builds gets those parameters moved into groups of their own with that
rate (same weight decay); the schedule (warm-up, decay) then scales every group alike, since
``LambdaLR`` multiplies each group's initial rate.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from trainer_core.models.embeddings import embedding_parameters

log = logging.getLogger(__name__)


def split_embedding_groups(optimizer: Any, parameters: list[Any], learning_rate: float) -> int:
    """Move ``parameters`` out of ``optimizer``'s groups into groups of their own at
    ``learning_rate`` (one per original group, keeping its other settings). Call before the first
    step (the optimizer has no state yet). Returns the number of values moved."""
    ids = {id(p) for p in parameters}
    moved = 0
    for group in list(optimizer.param_groups):
        mine = [p for p in group["params"] if id(p) in ids]
        if not mine:
            continue
        group["params"] = [p for p in group["params"] if id(p) not in ids]
        settings = {key: value for key, value in group.items() if key != "params"}
        optimizer.add_param_group({**settings, "params": mine, "lr": learning_rate})
        moved += sum(p.numel() for p in mine)
    optimizer.param_groups[:] = [group for group in optimizer.param_groups if group["params"]]
    return moved


class EmbeddingRate:
    """A mixin for ``transformers.Trainer`` subclasses: with ``embedding_learning_rate`` set (a
    float), the optimizer puts the embedding parameters (``models.embeddings.embedding_parameters``)
    in groups at that rate."""

    embedding_learning_rate: Optional[float] = None

    def create_optimizer(self, model=None):  # noqa: D102
        optimizer = super().create_optimizer(model)
        if self.embedding_learning_rate is not None:
            moved = split_embedding_groups(
                optimizer, embedding_parameters(self.model if model is None else model), self.embedding_learning_rate
            )
            log.info("embedding_learning_rate %s for %d embedding values", self.embedding_learning_rate, moved)
        return optimizer
