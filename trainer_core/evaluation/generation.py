"""Batched greedy answers for evaluation: one ``model.generate`` per batch of prompts.

Prompts are rendered as chat does (``serving.generate.render_prompt``: the chat template with the
generation prompt, no added special tokens), sorted by length (longest first, so batches carry
little padding and memory trouble shows in the first batch), left-padded with the pad token and
masked (``attention_mask`` 0 on padding; ``generate`` derives the position ids from it). Decoding is
greedy with the KV cache, ``max_new_tokens`` at most, and each row ends at its first stop token
(the eos token, the model's generation eos ids and the template's end-of-turn token:
``serving.generate.stop_token_ids``). A row's generated tokens are counted up to and including that
stop token (all of them when it never stops); tokens/s = generated tokens / seconds inside
``generate``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from trainer_core.serving.generate import generate_kwargs
from trainer_core.serving.schemas import GenerationSettings
from trainer_core.serving.threads import cpu_threads

TOKENS_EVERY = 8  # on_tokens is called every this many new tokens of a batch


@dataclass
class Answer:
    """One generated answer: ``text`` (special tokens removed), ``tokens`` generated (stop token
    included), ``finish``: ``stop`` (a stop token) or ``length`` (max_new_tokens reached), and
    ``raw``: the text with the special tokens kept but the stop tokens (what ``tools.parse`` reads:
    a family's call markers such as ``[TOOL_CALLS]`` or ``<|python_tag|>`` are special tokens, as
    chat serving keeps them; '' where the answer was made elsewhere, then ``text`` is read)."""

    text: str
    tokens: int
    finish: str
    raw: str = ""


@dataclass
class Generated:
    """Answers in the order of the prompts, with the generated tokens and seconds inside ``generate``."""

    answers: list[Answer] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> Optional[float]:
        """Generated tokens per second of generation (None before any)."""
        return self.tokens / self.seconds if self.seconds > 0 else None


def left_padded(prompts: list[list[int]], pad_id: int, device: str) -> tuple[Any, Any]:
    """(input_ids, attention_mask), both (B, T) with T the longest prompt, padding on the left."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device=device)  # (B, T)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)  # (B, T)
    return ids, mask


def cut_at_stop(new_ids: list[int], stops: set[int], max_new_tokens: int) -> tuple[list[int], str]:
    """(the generated ids up to and including the first stop token, finish reason) of one row."""
    for k, token in enumerate(new_ids):
        if token in stops:
            return new_ids[: k + 1], "stop"
    return new_ids, "length" if len(new_ids) >= max_new_tokens else "stop"


def _stop_flag(should_stop: Callable[[], bool], on_length: Callable[[int], None] = lambda length: None) -> Any:
    """A stopping criterion that ends the whole batch once ``should_stop()`` is true (Cancel); it
    also hands ``on_length`` the sequence length (prompt + new tokens) at every decoding step."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopFlag(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            on_length(input_ids.shape[1])
            return torch.full((input_ids.shape[0],), should_stop(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([StopFlag()])


def generate_answers(
    model: Any,
    tokenizer: Any,
    prompts: list[list[int]],
    max_new_tokens: int,
    batch_size: int,
    stops: list[int],
    device: str,
    should_stop: Callable[[], bool] = lambda: False,
    on_batch: Callable[[int, int], None] = lambda done, total: None,
    on_tokens: Callable[[int, int], None] = lambda batch, new: None,
) -> Optional[Generated]:
    """Greedy answers to ``prompts`` (token id lists), ``batch_size`` at a time. Calls
    ``on_batch(done, total)`` after each batch and ``on_tokens(batch, new)`` every
    ``TOKENS_EVERY`` new tokens within batch number ``batch`` (1-based), so a long batch shows
    progress; returns None when ``should_stop()`` turns true (also checked at every decoding step,
    so Cancel does not wait for a batch to finish)."""
    import torch

    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    kwargs = generate_kwargs(GenerationSettings(temperature=0, max_new_tokens=max_new_tokens))
    stop_set, pad_id = set(stops), tokenizer.pad_token_id
    answers: list[Optional[Answer]] = [None] * len(prompts)
    result = Generated()
    with torch.inference_mode():
        for done, batch in enumerate(batches, 1):
            if should_stop():
                return None
            input_ids, attention = left_padded([prompts[i] for i in batch], pad_id, device)
            began, prompt_length = time.perf_counter(), input_ids.shape[1]

            def on_length(length: int, batch: int = done, prompt: int = prompt_length) -> None:
                if (length - prompt) % TOKENS_EVERY == 0 and length > prompt:
                    on_tokens(batch, length - prompt)

            with cpu_threads(device):  # each batch with the threads the load leaves (serving.threads)
                output = model.generate(
                    input_ids=input_ids,
                    attention_mask=attention,
                    eos_token_id=stops,
                    pad_token_id=pad_id,
                    stopping_criteria=_stop_flag(should_stop, on_length),
                    **kwargs,
                )
            new = output[:, input_ids.shape[1] :].tolist()  # (B, new tokens); .tolist() waits for the device
            result.seconds += time.perf_counter() - began
            if should_stop():
                return None
            for row, ids in zip(batch, new):
                kept, finish = cut_at_stop(ids, stop_set, max_new_tokens)
                text = tokenizer.decode(kept, skip_special_tokens=True)
                raw = tokenizer.decode([t for t in kept if t not in stop_set], skip_special_tokens=False)
                answers[row] = Answer(text, len(kept), finish, raw)
                result.tokens += len(kept)
            on_batch(done, len(batches))
    result.answers = [a for a in answers if a is not None]
    return result
