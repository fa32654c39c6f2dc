"""Whether a model keeps packed rows apart, measured on the model itself.

Padding-free batches put a batch's rows end to end in one row, with ``position_ids`` restarting at
each row (TRL's ``DataCollatorForLanguageModeling(padding_free=True)``). Each row must attend only
to itself. Most architectures in transformers 5 ensure it (per-row ``sdpa_varlen``, flash
attention's varlen path, or a block-diagonal mask built from the ``position_ids``); some do not:
gpt-oss builds its masks without ``position_ids``, so its packed rows would attend to each other
and train on a context that never exists. Rather than keep a list of families, the trainer asks the
loaded model: two short rows, packed and alone, must give the same logits.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)
ROWS = ((11, 12, 13, 14, 15, 16, 17, 18), (21, 22, 23, 24, 25, 26))


def keeps_packed_rows_apart(model: Any) -> bool:
    """True when ``model`` (as the trainer will run it: its training attention set) gives each of
    two packed rows the logits it gives the row alone, within ``5e-2 * max|logit| + 1e-3`` (16-bit
    rounding passes, attention across rows does not: it moves logits by their own order of
    magnitude). Three forward passes of at most 14 tokens, no gradients, dropout off for them."""
    import torch

    was_training = model.training
    device = next(model.parameters()).device
    ids = [torch.tensor([row], device=device) for row in ROWS]
    packed = torch.cat(ids, dim=1)
    positions = torch.cat([torch.arange(len(row), device=device) for row in ROWS]).unsqueeze(0)
    bounds = torch.tensor([0, len(ROWS[0]), len(ROWS[0]) + len(ROWS[1])], device=device, dtype=torch.int32)
    extra = {"cu_seq_lens_q": bounds, "cu_seq_lens_k": bounds, "max_length_q": 8, "max_length_k": 8}
    model.eval()
    try:
        with torch.no_grad():
            together = model(input_ids=packed, position_ids=positions, use_cache=False, **extra).logits[0].float()
            alone = torch.cat([model(input_ids=row, use_cache=False).logits[0].float() for row in ids])
    finally:
        model.train(was_training)
    difference = (together - alone).abs().max().item()
    apart = difference <= 5e-2 * alone.abs().max().item() + 1e-3
    if not apart:
        log.info("packed rows attend to each other in %s (logits move by %.3g)", type(model).__name__, difference)
    return apart
