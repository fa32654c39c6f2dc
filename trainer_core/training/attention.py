"""Per-sequence SDPA for padding-free batches ("varlen" attention without flash-attn).

TRL's padding-free collator flattens a batch of B rows into one row of T = sum(n_i) tokens with
``position_ids`` restarting at 0 for each row and ``cu_seq_lens_q`` = [0, n_1, n_1+n_2, ..., T]
(the FlashAttention varlen convention). Plain ``sdpa`` then needs a dense (T, T) block-diagonal mask
and computes all T^2 scores; flash-attn, which handles ``cu_seq_lens`` natively, is not installed on
CPU. This attention runs causal SDPA on each row's slice instead: sum(n_i^2) work, the same result.
On 4 alpaca rows (695 tokens) the masked path spent 25 % of a LoRA step in attention (bench/throughput.py
measures the whole effect).

Layers with a sliding window (Mistral, Phi-3, Gemma 2/3 local layers: the window comes as the
``sliding_window`` argument or attribute) fall back to the masked path, which honours the window;
for configs without one the mask builder skips the (T, T) mask that the per-row path never reads.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

VARLEN_SDPA = "sdpa_varlen"
FP32 = {"on": False}  # this process's bf16 runs compute attention in fp32 (register_varlen_sdpa)


def varlen_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Optional[torch.Tensor],
    dropout: float = 0.0,
    scaling: Optional[float] = None,
    is_causal: Optional[bool] = None,
    cu_seq_lens_q: Optional[torch.Tensor] = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention for query/key/value of shape (batch, heads, tokens, head_dim); returns
    (batch, tokens, heads, head_dim) like transformers' ``sdpa_attention_forward``.

    With ``cu_seq_lens_q`` (int32 offsets, shape (rows + 1,)) and batch 1, each slice
    ``[cu[i], cu[i+1])`` attends causally to itself only; otherwise this is plain ``sdpa``. bf16
    inputs on a CPU are computed in fp32 (and the output given back in bf16) when
    ``register_varlen_sdpa(fp32=True)`` said so: where bf16 attention measured slower
    (``models.precision``)."""
    if FP32["on"] and query.dtype == torch.bfloat16 and query.device.type == "cpu":
        with torch.autocast("cpu", enabled=False):
            out, weights = varlen_sdpa_forward(
                module,
                query.float(),
                key.float(),
                value.float(),
                attention_mask,
                dropout=dropout,
                scaling=scaling,
                is_causal=is_causal,
                cu_seq_lens_q=cu_seq_lens_q,
                **kwargs,
            )
        return out.to(torch.bfloat16), weights
    sliding = kwargs.get("sliding_window") or getattr(module, "sliding_window", None)
    if cu_seq_lens_q is None or query.shape[0] != 1 or sliding or not getattr(module, "is_causal", True):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    bounds = cu_seq_lens_q.tolist()  # a CPU tensor (LeanSFTTrainer keeps it there): no device sync
    pieces = [
        sdpa_attention_forward(
            module,
            query[:, :, start:end],
            key[:, :, start:end],
            value[:, :, start:end],
            None,
            dropout=dropout,
            scaling=scaling,
            is_causal=True,
        )[0]
        for start, end in zip(bounds[:-1], bounds[1:])
        if end > start
    ]
    return torch.cat(pieces, dim=1), None


def varlen_mask(
    *args: Any, config: Any = None, attention_mask: Optional[torch.Tensor] = None, **kwargs: Any
) -> Optional[torch.Tensor]:
    """``sdpa_mask``, except None (no mask) when there is no padding mask and the model has no
    sliding window: causal attention within each row is then all the per-row path needs. (A packed
    row given without ``cu_seq_lens_q`` would attend across rows: TRL's collator always gives them.)"""
    sliding = getattr(config, "sliding_window", None) or any(
        "sliding" in kind for kind in getattr(config, "layer_types", None) or ()
    )
    if attention_mask is None and not sliding:
        return None
    return sdpa_mask(*args, config=config, attention_mask=attention_mask, **kwargs)


def register_varlen_sdpa(fp32: bool = False) -> str:
    """Register ``sdpa_varlen`` with transformers (idempotent); returns the name to pass to
    ``model.set_attn_implementation``. ``fp32``: this process computes bf16 attention on a CPU in
    fp32 (see ``varlen_sdpa_forward``)."""
    FP32["on"] = fp32
    AttentionInterface.register(VARLEN_SDPA, varlen_sdpa_forward)
    AttentionMaskInterface.register(VARLEN_SDPA, varlen_mask)
    return VARLEN_SDPA
