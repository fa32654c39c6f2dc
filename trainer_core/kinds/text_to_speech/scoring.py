"""A text-to-speech model's reconstruction loss: how well it predicts a clip's codec frames after
its text (the backbone's loss on the first codebook plus the depth decoder's on the others, mean
token cross-entropy in nats, as training scores it), for the evaluation and the export's check."""

from __future__ import annotations

import contextlib
from typing import Any


def reconstruction_loss(model: Any, processor: Any, rows: list[dict], use_adapter: bool = True) -> float:
    """``model``'s mean loss (backbone + depth decoder) on ``rows`` (``{"audio": float32 samples or a
    reference, "text", "speaker"}``), one row at a time, no gradients; ``use_adapter`` False: a LoRA
    model's base (adapter disabled)."""
    import torch

    from trainer_core.kinds.text_to_speech.collator import TtsCollator

    collator = TtsCollator(processor)
    collator.dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    device = next(model.parameters()).device
    losses = []
    off = model.disable_adapter() if not use_adapter and hasattr(model, "disable_adapter") else contextlib.nullcontext()
    with torch.inference_mode(), off:
        for row in rows:
            batch = {k: v.to(device) for k, v in collator([row]).items()}
            losses.append(float(model(**batch).loss))
    return sum(losses) / max(len(losses), 1)
