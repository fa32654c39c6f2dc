"""``use_loftq``: PEFT's LoftQ initialisation of the adapters of a QLoRA run (Li et al. 2023,
"LoftQ: LoRA-Fine-Tuning-Aware Quantization", https://arxiv.org/abs/2310.08659).

With a 4-bit base the adapters start from the quantization error instead of zero: A and B are set
so that the 4-bit weight plus B A approximates the full-precision weight (an SVD of the residual).
PEFT's ``replace_lora_weights_loftq`` does it on a bitsandbytes 4-bit ``PeftModel``, reading the
full-precision weights from the model's safetensors files; its arithmetic runs on a CUDA (or XPU)
device, so the check refuses ``use_loftq`` on a machine that trains on the CPU.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
LOFTQ_DEVICES = ("cuda", "xpu")


def loftq_refusal(device: str) -> str | None:
    """Why ``use_loftq`` cannot run on ``device`` ("cpu", "cuda", ...), or None when it can."""
    if device in LOFTQ_DEVICES:
        return None
    return (
        f"use_loftq: PEFT's LoftQ initialisation computes on a CUDA GPU and this server trains on the {device}; "
        "turn use_loftq off (QLoRA then starts its adapters at zero, as usual)"
    )


def apply_loftq(model: Any, device: str) -> None:
    """Re-initialise the LoRA weights of ``model`` (a ``PeftModel`` on a 4-bit base) with LoftQ,
    from the safetensors files of the folder the base was loaded from. Raises ValueError naming
    ``use_loftq`` on a device LoftQ cannot use."""
    refusal = loftq_refusal(device)
    if refusal:
        raise ValueError(refusal)
    from peft import replace_lora_weights_loftq

    source = model.get_base_model().config._name_or_path
    folder = source if Path(source).is_dir() else None  # None: PEFT finds a Hub id in the local cache
    replace_lora_weights_loftq(model, model_path=folder)
    log.info("LoRA weights initialised with LoftQ from %s", source)
