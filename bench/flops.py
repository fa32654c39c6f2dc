"""The compute the throughput bench compares against: the machine's sustained matmul rate
(``matmul_gflops``) and a LoRA training step's FLOPs (``model_flops``, PaLM-style counting)."""

from __future__ import annotations

import statistics
import time
from typing import Any, Optional


def matmul_gflops(dtype: str = "float32", size: int = 2048, seconds: float = 3.0) -> float:
    """Sustained GFLOP/s of ``size``-square ``torch.mm`` in ``dtype``: the median of back-to-back
    products over about ``seconds`` (2 size^3 FLOPs each), after one warm-up product."""
    import torch

    a = torch.randn(size, size, dtype=getattr(torch, dtype))
    b = torch.randn(size, size, dtype=getattr(torch, dtype))
    torch.mm(a, b)
    rates, deadline = [], time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(rates) < 3:
        began = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * size**3 / (time.perf_counter() - began) / 1e9)
    return statistics.median(rates)


def model_flops(model: Any, rows: list[list[int]], head_positions: Optional[int] = None) -> float:
    """PaLM-style LoRA training FLOPs for the given row lengths: sum over rows of 4 N n + 12 L d n^2,
    N = block weights + LM head. With ``head_positions``, the LM head is counted at that many
    positions instead of at every token (what our trainer executes)."""
    config = model.config
    d, layers = config.hidden_size, config.num_hidden_layers
    inner = config.intermediate_size
    head_dim = getattr(config, "head_dim", None) or d // config.num_attention_heads
    q = config.num_attention_heads * head_dim
    kv = config.num_key_value_heads * head_dim
    per_layer = d * q + 2 * d * kv + q * d + 3 * d * inner
    head = config.vocab_size * d
    tokens = sum(n for batch in rows for n in batch)
    blocks = sum(4 * layers * per_layer * n + 12 * layers * d * n * n for batch in rows for n in batch)
    return float(blocks + 4 * head * (tokens if head_positions is None else head_positions))
