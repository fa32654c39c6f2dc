"""The built-in reward functions, in TRL's reward signature.

Each ``make_*`` returns a function ``f(prompts, completions, completion_ids=None, **columns) ->
list[float | None]`` (``trl.GRPOTrainer``'s ``reward_funcs``: one value per completion; the data's
other columns arrive as keyword lists, aligned with ``completions``). Completions are text, or
message lists (conversational prompts) whose assistant contents are read. A function's
``__name__`` is the name TRL logs it under (``rewards/<name>/mean``).
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Callable
from typing import Any, Optional

import regex

from trainer_core.rewards.answers import same_answer
from trainer_core.rewards.schemas import RewardSpec, checked_schema
from trainer_core.tools.json_schema import validation_errors
from trainer_core.tools.json_schema import validator as schema_validator

RewardFunction = Callable[..., list[Optional[float]]]
log = logging.getLogger(__name__)
MATCH_SECONDS = 0.5  # the format reward's time limit per completion (regex's timeout)


def completion_text(completion: Any) -> str:
    """The text of one completion: a string as is; a message list's assistant contents joined."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # content parts
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


def _named(function: RewardFunction, name: str) -> RewardFunction:
    function.__name__ = function.__qualname__ = name
    return function


def make_answer_match(column: str, numeric: bool, name: str) -> RewardFunction:
    """1.0 where the completion's final answer equals the row's ``column`` value (``answers.same_answer``;
    ``numeric``: as numbers), else 0.0. Raises KeyError naming the column when the data lacks it."""

    def reward(prompts, completions, completion_ids=None, **columns):
        if column not in columns:
            raise KeyError(f"reward {name}: the data has no column {column!r} (its columns: {sorted(columns)})")
        return [
            1.0 if same_answer(completion_text(c), ref, numeric) else 0.0
            for c, ref in zip(completions, columns[column])
        ]

    return _named(reward, name)


def make_format(pattern: str, name: str = "format") -> RewardFunction:
    """1.0 where ``pattern`` (a regular expression, dot matching newlines) matches the whole
    completion, outer whitespace stripped; else 0.0. Matched by the ``regex`` library with a time
    limit of ``MATCH_SECONDS`` per completion: a pattern that backtracks catastrophically on some
    completion (e.g. ``(a+)+$``) scores it 0.0 and is logged once, instead of hanging the run."""
    compiled = regex.compile(pattern, regex.DOTALL)
    warned = []

    def score(text: str) -> float:
        try:
            return 1.0 if compiled.fullmatch(text, timeout=MATCH_SECONDS) else 0.0
        except TimeoutError:
            if not warned:
                warned.append(True)
                log.warning("reward %s: the pattern took over %.1f s on a completion; scored 0", name, MATCH_SECONDS)
            return 0.0

    def reward(prompts, completions, completion_ids=None, **columns):
        return [score(completion_text(c).strip()) for c in completions]

    return _named(reward, name)


def make_length(target: Optional[int], max_length: int, name: str = "length") -> RewardFunction:
    """Completion length in tokens (``completion_ids``; words where TRL gives none): with ``target``,
    ``max(0, 1 - |n - target| / target)``; without, ``-n / max_length`` (shorter is better)."""

    def reward(prompts, completions, completion_ids=None, **columns):
        lengths = (
            [len(ids) for ids in completion_ids]
            if completion_ids is not None
            else [len(completion_text(c).split()) for c in completions]
        )
        if target:
            return [max(0.0, 1.0 - abs(n - target) / target) for n in lengths]
        return [-min(n / max_length, 1.0) for n in lengths]

    return _named(reward, name)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parsed_json(text: str) -> Any:
    """The JSON value ``text`` holds: the whole text, else the first fenced ```json block. Raises
    ValueError when neither parses."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        fenced = _FENCE.search(text)
        if fenced is None:
            raise
        return json.loads(fenced.group(1))


def make_json(schema_text: Optional[str], name: str = "json") -> RewardFunction:
    """1.0 where the completion is valid JSON (``parsed_json``) and, with ``schema_text`` (a JSON
    schema, checked by ``rewards.schemas.checked_schema``: references inside it only), matches it
    (the ``jsonschema`` library, with an empty ``referencing.Registry``: nothing is ever fetched or
    read to resolve a reference); else 0.0."""
    validator = None
    if schema_text:
        schema = checked_schema(schema_text)
        validator = schema_validator(schema)

    def valid(value: Any) -> bool:
        try:
            return validator is None or validator.is_valid(value)
        except validation_errors():
            return False

    def reward(prompts, completions, completion_ids=None, **columns):
        scores = []
        for c in completions:
            try:
                value = parsed_json(completion_text(c))
            except (ValueError, RecursionError):
                scores.append(0.0)
                continue
            scores.append(1.0 if valid(value) else 0.0)
        return scores

    return _named(reward, name)


def repeated_share(text: str, n: int) -> float:
    """The share of ``text``'s word ``n``-grams that repeat an earlier one (0: none repeat; 0 for
    texts shorter than ``n`` words). open-r1's repetition penalty (``rewards.py``,
    https://github.com/huggingface/open-r1) is minus this share."""
    words = text.lower().split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 0.0 if not grams else 1.0 - len(set(grams)) / len(grams)


def make_repetition(n: int, name: str = "repetition") -> RewardFunction:
    """-(share of repeated word ``n``-grams): 0 for a text without repeats, towards -1 for a loop."""

    def reward(prompts, completions, completion_ids=None, **columns):
        return [0.0 - repeated_share(completion_text(c), n) for c in completions]  # 0.0, never -0.0

    return _named(reward, name)


SCRIPT_PREFIXES = {"cjk": ("CJK", "HIRAGANA", "KATAKANA")}


def script_share(text: str, script: str) -> Optional[float]:
    """The share of ``text``'s letters written in ``script`` (the first word of their Unicode name:
    LATIN, CYRILLIC, ...; ``cjk`` also takes kana), None when it has no letters."""
    prefixes = SCRIPT_PREFIXES.get(script, (script.upper(),))
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return None
    inside = sum(1 for ch in letters if unicodedata.name(ch, "").startswith(prefixes))
    return inside / len(letters)


def make_language(script: str, name: str = "language") -> RewardFunction:
    """The share of the completion's letters in ``script`` (0..1); a completion without letters
    gets None (TRL leaves it out of this function's mean)."""

    def reward(prompts, completions, completion_ids=None, **columns):
        return [script_share(completion_text(c), script) for c in completions]

    return _named(reward, name)


def make_reward(spec: RewardSpec, max_completion_length: int, name: str) -> RewardFunction:
    """The function ``spec`` names (not ``code``: ``rewards.code_file``), logged as ``name``."""
    if spec.name in ("exact_match", "numeric_match"):
        return make_answer_match(str(spec.column), spec.name == "numeric_match", name)
    if spec.name == "format":
        return make_format(str(spec.pattern), name)
    if spec.name == "length":
        return make_length(spec.target_length, max_completion_length, name)
    if spec.name == "json":
        return make_json(spec.json_schema, name)
    if spec.name == "repetition":
        return make_repetition(spec.ngram, name)
    if spec.name == "language":
        return make_language(spec.script, name)
    raise ValueError(f"reward {spec.name} is not a built-in reward")
