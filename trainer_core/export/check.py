"""The export check: a fixed set of prompts answered greedily by the run as trained (the
reference) and by the exported model loaded back, compared token by token.

Prompts are rendered with the run's chat template exactly as chat and training render them
(``serving.generate.render_prompt``). Each model answers every prompt with ``NEW_TOKENS`` greedy
tokens from its own forward passes (argmax of the last logits, KV cache on, no stop token, no
logits processors), so nothing but the weights differs between the two.

Two counts come out:

- **teacher-forced**: the exported model reads the reference's answer (one forward pass per prompt)
  and predicts each next token; a prediction that differs is *explained* when the reference's top
  two tokens there were less than ``Rule.near_tie`` logits apart (a near-tie that the dtype's
  rounding can flip), else it is a mismatch the export must not have;
- **tokens equal** (the summary, ``"f16: 3/3 prompts, 60/60 tokens equal"``): each of the exported
  model's own greedy answers up to its first difference from the reference's (after a difference
  the models continue from different texts, so later positions say nothing). Up to its first
  teacher-forced difference its answer *is* the reference's, so only the rest is generated
  (``exported_answers``).

Measured on a 3-step LoRA run of SmolLM2-135M (``bench/export.py``): the largest logit drift from
the reference on the check prompts was 1e-4 (float32 merged), 0.04 (float16 / GGUF f16), 0.5
(bfloat16), 0.9 (GGUF q8_0). The run had near-ties of 0.003 and 0.0014 logits: float16 and GGUF f16
flipped the first (41/60 tokens equal free-running, 59/60 teacher-forced), bfloat16 the second
(58/60, 59/60); q8_0 kept 60/60, float32 60/60. A QLoRA run merged into bfloat16 flipped one near-tie
of 0.17 logits. ``RULES`` allows about twice the measured drift; float32 must be exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainer_core.export.schemas import CheckResult
from trainer_core.export.weights import small_model_threads

NEW_TOKENS = 20  # per prompt
CHECK_PROMPTS: tuple[str, ...] = (
    "What is your name?",
    "Explain in one sentence what a neural network is.",
    "Write a short poem about the sea.",
)


@dataclass(frozen=True)
class Rule:
    """What a check accepts: teacher-forced predictions equal to the reference's except at
    near-ties narrower than ``near_tie`` logits, and at least ``min_forced`` of them equal."""

    near_tie: float
    min_forced: float

    def describe(self) -> str:
        """The rule in words, for ``CheckResult.required``."""
        if self.near_tie == float("inf"):
            return (
                f"an agreement figure (a quantised format rounds weights to 4-6 bits: differences are expected and "
                f"stated, not failures), with at least {self.min_forced:.0%} of the next-token predictions on the "
                "answers of the run as trained equal to its own, which only a broken file misses"
            )
        if self.near_tie == 0:
            return f"all {NEW_TOKENS} greedy tokens of every prompt equal to those of the run as trained"
        return (
            f"every next-token prediction on the answers of the run as trained equal to its own, except "
            f"at near-ties (its top two tokens less than {self.near_tie:g} logits apart, which this "
            f"precision's rounding can flip), and at least {self.min_forced:.0%} equal"
        )


EXACT = Rule(near_tie=0.0, min_forced=1.0)
# The share of next-token predictions a quantised file must keep; below it the file is broken (a
# wrong tensor layout, a lost norm), not merely rounded. Measured in bench/export.py (docs/BENCHMARKS.md).
QUANTISED_FLOOR = {"q6_k": 0.5, "q5_k_m": 0.5, "q4_k_m": 0.4, "q4_0": 0.4}
# Keys: the exported precision. float32: a float32 merged model or re-saved full fine-tune, and the
# adapter zip; f16 is the GGUF f16 file (weights in float16, norms kept in float32 by the converter).
RULES: dict[str, Rule] = {
    "float32": EXACT,
    "adapter": EXACT,
    "float16": Rule(near_tie=0.1, min_forced=0.95),
    "f16": Rule(near_tie=0.1, min_forced=0.95),
    "bfloat16": Rule(near_tie=1.0, min_forced=0.9),
    "bf16": Rule(near_tie=1.0, min_forced=0.9),
    "q8_0": Rule(near_tie=2.0, min_forced=0.9),
    # Quantised to 4-6 bits: agreement stated, not judged token by token (floors: QUANTISED_FLOOR).
    **{name: Rule(near_tie=float("inf"), min_forced=floor) for name, floor in QUANTISED_FLOOR.items()},
}


@dataclass
class Answers:
    """A model's greedy answers (``tokens``: one list of ``NEW_TOKENS`` ids per prompt) and, for the
    reference, the gap in logits between its top two tokens at each answer position (``gaps``)."""

    tokens: list[list[int]]
    gaps: list[list[float]]


def prompt_ids(tokenizer: Any) -> list[list[int]]:
    """Token ids of each check prompt as a one-turn chat with the generation prompt."""
    from trainer_core.serving.generate import render_prompt

    return [render_prompt(tokenizer, [{"role": "user", "content": text}]) for text in CHECK_PROMPTS]


def greedy_answers(model: Any, prompts: Sequence[Sequence[int]], new_tokens: int = NEW_TOKENS) -> Answers:
    """``new_tokens`` greedy ids per prompt (always that many: no stop token) and the top-2 logit
    gap at each step, from the model's own forward passes (KV cache on) on its own device."""
    tokens, gaps = [], []
    with small_model_threads(model):
        for prompt in prompts:
            ids, gap = _greedy(model, list(prompt), new_tokens)
            tokens.append(ids)
            gaps.append(gap)
    return Answers(tokens, gaps)


def _greedy(model: Any, context: list[int], new_tokens: int) -> tuple[list[int], list[float]]:
    """Greedy continuation of ``context``: (ids, top-2 logit gaps), ``new_tokens`` of each."""
    import torch

    device = next(model.parameters()).device
    ids: list[int] = []
    gaps: list[float] = []
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([context], device=device), use_cache=True)  # logits (1, T, V)
        while len(ids) < new_tokens:
            top = out.logits[0, -1].float().topk(2)
            ids.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            if len(ids) < new_tokens:
                step = torch.tensor([[ids[-1]]], device=device)  # (1, 1)
                out = model(input_ids=step, past_key_values=out.past_key_values, use_cache=True)
    return ids, gaps


def exported_answers(
    model: Any, prompts: Sequence[Sequence[int]], reference: Sequence[Sequence[int]], forced: Sequence[Sequence[int]]
) -> list[list[int]]:
    """The exported model's own greedy answers, without generating what is known: up to its first
    teacher-forced difference it says what the reference said; from there it continues greedily."""
    answers = []
    for prompt, ref, pred in zip(prompts, reference, forced):
        k = common_prefix(ref, pred)
        if k == len(ref):
            answers.append(list(ref))
            continue
        head = list(ref[:k]) + [pred[k]]
        rest = len(ref) - len(head)
        with small_model_threads(model):
            answers.append(head + (_greedy(model, list(prompt) + head, rest)[0] if rest else []))
    return answers


def forced_predictions(
    model: Any, prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]]
) -> list[list[int]]:
    """The model's argmax at each answer position when it reads prompt + ``answers`` (one forward
    pass per prompt): what it would say next, given the reference's text so far."""
    import torch

    device = next(model.parameters()).device
    predictions = []
    with torch.inference_mode(), small_model_threads(model):
        for prompt, answer in zip(prompts, answers):
            ids = torch.tensor([list(prompt) + list(answer)], device=device)  # (1, T + N)
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]  # (N, V)
            predictions.append(logits.argmax(-1).tolist())
    return predictions


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def compare(
    label: str,
    reference: Answers,
    free: list[list[int]],
    forced: list[list[int]],
    rule: Rule,
    problems: Sequence[str] = (),
) -> CheckResult:
    """Judge an exported model's free-running answers ``free`` and teacher-forced predictions
    ``forced`` against ``reference`` by ``rule``; ``problems`` found elsewhere (a lost chat template,
    a wrong EOS) fail the check too."""
    ref = reference.tokens
    prefixes = [common_prefix(r, c) for r, c in zip(ref, free)]
    total, equal = sum(len(r) for r in ref), sum(prefixes)
    prompts_equal = sum(p == len(r) for p, r in zip(prefixes, ref))
    found, near_ties, forced_equal = list(problems), [], 0
    for i, (r, f, gaps) in enumerate(zip(ref, forced, reference.gaps)):
        for j, (want, got) in enumerate(zip(r, f)):
            if want == got:
                forced_equal += 1
            elif gaps[j] < rule.near_tie:
                near_ties.append(f"prompt {i + 1} token {j + 1}: a near-tie (top two {gaps[j]:.4f} logits apart)")
            else:
                found.append(
                    f"prompt {i + 1} token {j + 1}: the exported model predicts another token where the "
                    f"run as trained was sure by {gaps[j]:.2f} logits"
                )
    if total and forced_equal / total < rule.min_forced:
        found.append(
            f"only {forced_equal}/{total} next-token predictions equal; this format needs {rule.min_forced:.0%}"
        )
    summary = f"{label}: {prompts_equal}/{len(ref)} prompts, {equal}/{total} tokens equal"
    if rule.near_tie == float("inf"):
        summary += f"; {forced_equal}/{total} next-token predictions agree"
        near_ties = []  # every difference is the rounding's: stated by the figure, not listed
    elif near_ties:
        summary += f" ({len(near_ties)} difference{'s' * (len(near_ties) > 1)} at near-ties)"
    return CheckResult(
        passed=not found,
        summary=summary,
        prompts_equal=prompts_equal,
        prompts_total=len(ref),
        tokens_equal=equal,
        tokens_total=total,
        forced_tokens_equal=forced_equal,
        required=rule.describe(),
        problems=found,
        near_ties=near_ties,
        first_difference=[p if p < len(r) else None for p, r in zip(prefixes, ref)],
    )
