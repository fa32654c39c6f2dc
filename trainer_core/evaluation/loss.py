"""Loss and perplexity on the answers, teacher-forced and batched.

Each row (prompt + reference answer) is rendered and labelled exactly as training does
(``data.tokenization.tokenize_dataset`` with the answer-only mask: every assistant turn's content and
its end-of-turn token, cut to ``max_seq_length``). The loss is the mean token cross-entropy over all
labelled tokens of all rows (nats; the sum over tokens / the number of tokens, so long answers weigh
more than short ones), and perplexity = exp(loss). The logit at position t predicts token t+1, as
in transformers' ``ForCausalLMLoss``.

Logits are computed only at the labelled positions where the model supports it
(``logits_to_keep`` as a boolean (B, T) mask, transformers' ``slice_logits_to_keep``), which keeps
a batch's memory at (answer tokens x vocabulary) instead of (B x T x vocabulary).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import datasets

from trainer_core.data.tokenization import IGNORE, tokenize_dataset
from trainer_core.data.tool_rows import TOOLS
from trainer_core.evaluation.rows import EvalRow


@dataclass
class LossResult:
    """Cross-entropy ``nats`` summed over ``tokens`` answer tokens."""

    nats: float
    tokens: int

    @property
    def loss(self) -> Optional[float]:
        """Mean cross-entropy per answer token (nats); None without tokens."""
        return self.nats / self.tokens if self.tokens else None

    @property
    def perplexity(self) -> Optional[float]:
        """exp(loss); None without tokens (inf when the loss overflows exp)."""
        loss = self.loss
        return None if loss is None else (math.exp(loss) if loss < 700 else math.inf)


def tokenize_rows(rows: list[EvalRow], tokenizer: Any, max_seq_length: int) -> tuple[datasets.Dataset, int, int]:
    """(columns ``input_ids`` / ``labels`` as training builds them, truncated rows, dropped rows).
    Raises DatasetError when no row keeps an answer token (raise max_seq_length)."""
    conversations = datasets.Dataset.from_dict(
        {"messages": [row.conversation for row in rows], TOOLS: [row.tools for row in rows]}
    )
    encoded, stats = tokenize_dataset(conversations, tokenizer, max_seq_length, train_on_completions=True)
    return encoded, stats.truncated_rows, stats.dropped_rows


def _keeps_masked_logits(model: Any) -> bool:
    """True when the model's forward slices hidden states with transformers' ``slice_logits_to_keep``."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    return hasattr(sys.modules.get(type(core).__module__), "slice_logits_to_keep")


def _batch_nats(
    model: Any, ids: list[list[int]], labels: list[list[int]], pad_id: int, device: str, masked_logits: bool
) -> tuple[float, int]:
    """(summed cross-entropy in nats, labelled tokens) of one right-padded batch."""
    import torch

    width = max(len(row) for row in ids)
    input_ids = torch.tensor([row + [pad_id] * (width - len(row)) for row in ids], device=device)  # (B, T)
    attention = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in ids], device=device)  # (B, T)
    targets = torch.tensor([row + [IGNORE] * (width - len(row)) for row in labels], device=device)[:, 1:]  # (B, T-1)
    predicts = torch.zeros_like(attention, dtype=torch.bool)  # (B, T): positions whose next token is labelled
    predicts[:, :-1] = targets != IGNORE
    wanted = targets[predicts[:, :-1]]  # (N,)
    if masked_logits:
        logits = model(
            input_ids=input_ids, attention_mask=attention, logits_to_keep=predicts, use_cache=False
        ).logits  # (N, V)
    else:
        logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits[:, :-1][
            predicts[:, :-1]
        ]  # (N, V)
    nats = torch.nn.functional.cross_entropy(logits.float(), wanted, reduction="sum")
    return float(nats), int(wanted.numel())


def answer_loss(
    model: Any,
    encoded: datasets.Dataset,
    pad_id: int,
    device: str,
    batch_size: int,
    should_stop: Callable[[], bool] = lambda: False,
    on_batch: Callable[[int, int], None] = lambda done, total: None,
) -> Optional[LossResult]:
    """The summed cross-entropy and answer tokens of ``model`` over the tokenized rows, ``batch_size``
    rows per forward pass (rows sorted by length, so batches carry little padding). Calls
    ``on_batch(done, total)`` after each batch; returns None when ``should_stop()`` turns true
    between batches."""
    import torch

    ids, labels = encoded["input_ids"], encoded["labels"]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first: memory trouble shows at once
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    masked = _keeps_masked_logits(model)
    nats, tokens = 0.0, 0
    with torch.inference_mode():
        for done, batch in enumerate(batches, 1):
            if should_stop():
                return None
            batch_nats, batch_tokens = _batch_nats(
                model, [ids[i] for i in batch], [labels[i] for i in batch], pad_id, device, masked
            )
            nats, tokens = nats + batch_nats, tokens + batch_tokens
            on_batch(done, len(batches))
    return LossResult(nats, tokens)
