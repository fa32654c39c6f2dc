"""Evaluation of a vision-language model on held-out image rows: the loss on the answers and the
greedy answers, with each row's images, as training and chat make their inputs (``collator`` for
the loss: answers scored, image tokens never; ``prompt`` for the prompts). One row at a time for
generation (processors pad image rows unevenly across families); ``batch_size`` rows per forward
pass for the loss. ``VisionEvaluator`` is what the kind gives ``evaluation.worker``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional

from trainer_core.data.images import MARKER
from trainer_core.evaluation.generation import Answer, Generated, cut_at_stop
from trainer_core.evaluation.loss import LossResult
from trainer_core.evaluation.rows import EvalRow
from trainer_core.kinds.vision.collator import VisionCollator
from trainer_core.kinds.vision.prompt import vision_inputs
from trainer_core.serving.generate import generate_kwargs
from trainer_core.serving.schemas import GenerationSettings


def with_images(turns: list[dict[str, str]], images: list[str]) -> list[dict[str, Any]]:
    """``turns`` each given the images its ``<image>`` markers stand for, in order (chat's
    messages: ``prompt.placed``)."""
    out, left = [], list(images)
    for turn in turns:
        count = turn["content"].count(MARKER)
        out.append({**turn, "images": left[:count]})
        left = left[count:]
    return out


def prompt_length(processor: Any, row: EvalRow) -> int:
    """Tokens of ``row``'s prompt with its images and the generation prompt."""
    return int(vision_inputs(processor, with_images(row.prompt, row.images), "cpu")["input_ids"].shape[1])


def vision_loss(
    model: Any,
    processor: Any,
    rows: list[EvalRow],
    device: str,
    batch_size: int,
    should_stop: Callable[[], bool] = lambda: False,
    on_batch: Callable[[int, int], None] = lambda done, total: None,
) -> Optional[LossResult]:
    """Summed cross-entropy (nats) over the answer tokens of ``rows`` (conversation and images), as
    ``evaluation.loss.answer_loss`` counts it; None when ``should_stop()`` turns true."""
    import torch
    import torch.nn.functional as F

    collator = VisionCollator(processor, None, train_on_completions=True)
    batches = [rows[i : i + batch_size] for i in range(0, len(rows), batch_size)]
    nats, tokens = 0.0, 0
    with torch.inference_mode():
        for done, batch in enumerate(batches, 1):
            if should_stop():
                return None
            inputs = collator([{"messages": row.conversation, "images": row.images} for row in batch])
            labels = inputs.pop("labels").to(device)
            logits = model(**{k: v.to(device) for k, v in inputs.items()}, use_cache=False).logits.float()
            targets = labels[:, 1:]
            nats += F.cross_entropy(logits[:, :-1].transpose(1, 2), targets, ignore_index=-100, reduction="sum").item()
            tokens += int((targets != -100).sum())
            on_batch(done, len(batches))
    return LossResult(nats, tokens)


def vision_answers(
    model: Any,
    processor: Any,
    rows: list[EvalRow],
    max_new_tokens: int,
    stops: list[int],
    device: str,
    should_stop: Callable[[], bool] = lambda: False,
    on_batch: Callable[[int, int], None] = lambda done, total: None,
) -> Optional[Generated]:
    """Greedy answers to each row's prompt with its images, one row at a time; None when
    ``should_stop()`` turns true."""
    import torch

    kwargs = generate_kwargs(GenerationSettings(temperature=0, max_new_tokens=max_new_tokens))
    result = Generated()
    with torch.inference_mode():
        for done, row in enumerate(rows, 1):
            if should_stop():
                return None
            inputs = vision_inputs(processor, with_images(row.prompt, row.images), device)
            began = time.perf_counter()
            output = model.generate(
                **inputs, eos_token_id=stops, pad_token_id=processor.tokenizer.pad_token_id, **kwargs
            )
            new = output[0, inputs["input_ids"].shape[1] :].tolist()
            result.seconds += time.perf_counter() - began
            kept, finish = cut_at_stop(new, set(stops), max_new_tokens)
            result.answers.append(Answer(processor.tokenizer.decode(kept, skip_special_tokens=True), len(kept), finish))
            result.tokens += len(kept)
            on_batch(done, len(rows))
    return result


class VisionEvaluator:
    """``ModelKind.evaluator`` of a vision-language model: the functions above with its ``processor``."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor

    def prompt_length(self, row: EvalRow) -> int:
        """Tokens of ``row``'s prompt with its images (``prompt_length``)."""
        return prompt_length(self.processor, row)

    def loss(
        self, model: Any, rows: list[EvalRow], device: str, batch_size: int, *callbacks: Any
    ) -> Optional[LossResult]:
        """``vision_loss``; ``callbacks``: its ``should_stop`` and ``on_batch``."""
        return vision_loss(model, self.processor, rows, device, batch_size, *callbacks)

    def answers(
        self, model: Any, rows: list[EvalRow], max_new_tokens: int, stops: list[int], device: str, *callbacks: Any
    ) -> Optional[Generated]:
        """``vision_answers``; ``callbacks``: its ``should_stop`` and ``on_batch``."""
        return vision_answers(model, self.processor, rows, max_new_tokens, stops, device, *callbacks)
