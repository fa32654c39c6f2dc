"""Well-kept GPU kernels, used where they are installed and fit the model.

Liger Kernel's fused linear cross-entropy (``liger_kernel``, optional): on a CUDA device, for the
model families Liger patches (``MODEL_TYPE_TO_APPLY_LIGER_FN``: Llama, Qwen, Gemma, Mistral, Phi-3,
...), transformers applies Liger's kernels to the model (``TrainingArguments.use_liger_kernel``)
and the loss is computed by Liger's forward from the labels: the LM head and the cross-entropy
run chunk by chunk, so the (tokens, vocabulary) logits never exist at once. Elsewhere (a CPU,
Liger not installed, another family, image-text models) the trainer's own answer-only loss runs
(``trainer.answer_loss``). FlashAttention's varlen kernel for padding-free batches is chosen by
``models.attention_choice`` (``flash_attention_2`` where ``flash_attn`` is installed).
``bench/gpu_check.py`` checks the loss against the plain path on a GPU.
"""

from __future__ import annotations

import importlib.util
from typing import Any


def liger_applies(model: Any, device: str) -> bool:
    """True when Liger's kernels can train ``model`` on ``device``: a CUDA device, ``liger_kernel``
    importable, and ``model.config.model_type`` among the families Liger patches."""
    if not device.startswith("cuda") or importlib.util.find_spec("liger_kernel") is None:
        return False
    try:
        from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN
    except ImportError:  # an install without the transformers patches (or without triton)
        return False
    return getattr(getattr(model, "config", None), "model_type", None) in MODEL_TYPE_TO_APPLY_LIGER_FN
