"""The pydantic models of GRPO runs that the request and progress models hold: one chosen reward
function (``RewardSpec``) and one sampled completion shown in the live table (``CompletionSample``).
Field metadata lives here once; the form, the CLI and the API read it."""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional, get_args

import regex
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from trainer_core.vocabulary import LanguageScript, OptionalWholeNumber, RewardName, WholeNumber

# The R1-style format (DeepSeek-AI 2025, https://arxiv.org/abs/2501.12948): reasoning, then the answer.
DEFAULT_FORMAT = r"<think>.*?</think>\s*<answer>.*?</answer>"
Name = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")]
# What each reward needs besides its weight (validated below; the form shows these fields)
NEEDS = {
    "exact_match": "column",
    "numeric_match": "column",
    "format": "pattern",
    "code": "function",
}


class RewardSpec(BaseModel):
    """One reward function of a GRPO run and its weight (TRL's ``reward_weights``). Each returns a
    float per completion: ``exact_match`` / ``numeric_match`` 1 or 0 (the final answer against
    ``column``: ``rewards.answers``), ``format`` 1 or 0 (``pattern`` matches the whole completion),
    ``length`` 0..1 (closeness to ``target_length`` tokens) or, without a target, -1..0 (share of
    ``max_completion_length`` used), ``json`` 1 or 0 (parses; matches ``json_schema`` when given),
    ``repetition`` -1..0 (minus the share of repeated ``ngram``-grams, as open-r1's penalty),
    ``language`` 0..1 (share of letters in ``script``), ``code`` the user's ``function`` from
    ``reward_file``."""

    model_config = ConfigDict(extra="forbid")

    name: RewardName = Field(description="Which reward function (see the list in the form).")
    weight: float = Field(1.0, ge=-100, le=100, description="Its weight in the summed reward (TRL's reward_weights).")
    column: Optional[Name] = Field(
        None, description="exact_match / numeric_match: the data column holding the right answer (e.g. answer)."
    )
    pattern: Optional[str] = Field(
        None,
        max_length=1000,
        description=f"format: a regular expression the whole completion must match (e.g. {DEFAULT_FORMAT}).",
    )
    target_length: OptionalWholeNumber = Field(
        None,
        ge=1,
        le=32768,
        description="length: the completion length (tokens) that earns 1; empty: shorter is better.",
    )
    json_schema: Optional[str] = Field(
        None, max_length=20000, description="json: a JSON schema (as JSON text) the parsed completion must match."
    )
    ngram: WholeNumber = Field(3, ge=1, le=16, description="repetition: the n of the n-grams counted.")
    script: LanguageScript = Field(
        "latin",
        description=f"language: the writing system the answer should use: {', '.join(get_args(LanguageScript))}.",
    )
    function: Optional[Name] = Field(None, description="code: the name of a function in reward_file.")

    @model_validator(mode="after")
    def _needs(self) -> RewardSpec:
        needed = NEEDS.get(self.name)
        if self.name == "format" and self.pattern is None:
            self.pattern = DEFAULT_FORMAT
        if self.name in ("exact_match", "numeric_match") and self.column is None:
            self.column = "answer"
        if needed and getattr(self, needed) is None:
            raise ValueError(f"reward {self.name} needs {needed}")
        if self.pattern is not None:
            try:
                regex.compile(self.pattern)
            except (regex.error, RecursionError, OverflowError) as exc:
                raise ValueError(f"reward {self.name}: pattern is not a regular expression ({exc})") from None
        if self.json_schema is not None:
            checked_schema(self.json_schema)
        return self

    @property
    def label(self) -> str:
        """How charts and tables name it: the function name for code rewards, else ``name``
        with its column or n-gram when that tells two apart (``numeric_match:answer``)."""
        if self.name == "code":
            return str(self.function)
        if self.column and self.name in ("exact_match", "numeric_match"):
            return f"{self.name}:{self.column}"
        return self.name


def json_text(text: str, field: str) -> Any:
    """The JSON value of ``text`` (the user's, in ``field``). Raises ValueError naming ``field`` for
    text that is not JSON or nests too deeply for the parser (Python's ``json`` raises
    RecursionError past about a thousand levels)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{field}: the JSON nests too deeply; keep it under a few hundred levels") from None
    except ValueError as exc:
        raise ValueError(f"{field}: not JSON ({exc})") from None


def checked_schema(text: str) -> Any:
    """The JSON schema in ``text`` (``json_schema`` of a json reward), checked by
    ``tools.json_schema.schema_problem`` (its metaschema; every ``$ref`` inside the schema: a schema is
    never allowed to make the worker fetch a URL or read a file). Raises ValueError naming
    ``json_schema``."""
    from trainer_core.tools.json_schema import schema_problem

    schema = json_text(text, "reward json: json_schema")
    problem = schema_problem(schema)
    if problem is not None:
        raise ValueError(
            f"reward json: json_schema is {problem}"
            if problem.startswith("not")
            else f"reward json: json_schema: {problem}"
        )
    return schema


class CompletionSample(BaseModel):
    """One sampled completion of a logged GRPO step: its prompt (the last user turn, cut), the
    completion (cut), each reward function's value (None where it did not apply) and the total."""

    prompt: str
    completion: str
    rewards: dict[str, Optional[float]] = Field(default_factory=dict)
    reward: Optional[float] = None
    advantage: Optional[float] = None


def parse_reward(text: str) -> dict[str, object]:
    """One reward in the form's and the CLI's short form, ``name key=value ...`` (shell quoting for
    values with spaces), e.g. ``numeric_match column=answer weight=2`` or ``format weight=0.5``, as
    ``RewardSpec`` values. A JSON object is taken as is. Raises ValueError naming the bad part."""
    import shlex

    text = text.strip()
    if text.startswith("{"):
        value = json_text(text, "rewards")
        if not isinstance(value, dict):
            raise ValueError(f"rewards: {text[:60]!r} is not a JSON object")
        return value
    try:
        parts = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"rewards: {text[:60]!r}: {exc}") from None
    if not parts:
        raise ValueError("rewards: an empty line")
    values: dict[str, object] = {"name": parts[0]}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or key not in RewardSpec.model_fields or key == "name":
            known = ", ".join(k for k in RewardSpec.model_fields if k != "name")
            raise ValueError(f"rewards: {part!r} in {text[:60]!r} is not key=value with a key among {known}")
        values[key] = value
    return values


def reward_line(spec: RewardSpec) -> str:
    """``spec`` in the short form ``parse_reward`` reads (settings left at their defaults left out)."""
    import shlex

    parts = [spec.name]
    defaults = RewardSpec(name=spec.name, function=spec.function).model_dump()
    for key, value in spec.model_dump(exclude={"name"}).items():
        if value is not None and (value != defaults.get(key) or key == "weight"):
            parts.append(f"{key}={shlex.quote(str(value)) if str(value) else repr('')}")
    return " ".join(parts)
