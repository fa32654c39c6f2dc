"""The columns of a recipe, after NVIDIA data-designer's column model: ``llm-text``,
``llm-structured`` (a JSON schema), ``llm-judge`` (scores), ``sampler`` and ``expression`` (Jinja2).
Prompts and expressions are Jinja2 templates over the row so far (seed columns, then earlier
columns), rendered in a sandbox (no attribute or file access beyond the row's values, sizes bounded: ``sandbox``)."""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Annotated, Any, Literal, Optional, Union

import jsonschema
from jinja2 import TemplateSyntaxError, meta
from pydantic import BaseModel, Field, field_validator, model_validator

from trainer_core.recipes.errors import RecipeError
from trainer_core.recipes.sandbox import sandbox

ENV = sandbox()
SAMPLER_TYPES = ("category", "uniform")
JUDGE_REASONING_CHARS = 400  # a judge's reasoning, at most: bounds its answer (answer_size) so none is cut


@lru_cache(maxsize=256)
def template(text: str) -> Any:
    """``text`` compiled in the sandbox (cached: the same prompt renders for every row)."""
    return ENV.from_string(text)


def check_template(text: str, field: str) -> str:
    """``text`` if it compiles; raises RecipeError naming ``field`` and the line otherwise."""
    try:
        template(text)
    except TemplateSyntaxError as exc:
        raise RecipeError(f"{field}: the template does not parse (line {exc.lineno}: {exc.message})") from None
    return text


def names_used(text: str) -> set[str]:
    """The row columns template ``text`` reads."""
    return set(meta.find_undeclared_variables(ENV.parse(text)))


def lookup(row: dict[str, Any], path: str) -> Any:
    """The value at dotted ``path`` (``qa.evidence``) in ``row``; KeyError when absent."""
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


class _Column(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = Field(description="The column's name: how templates, gates and the output refer to it.")
    drop: bool = Field(False, description="Made and usable by later columns, but not kept in the rows file.")

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier():
            raise RecipeError(f"columns: '{value[:60]}' is not a column name (letters, digits, _)", fields=("columns",))
        return value

    def templates(self) -> list[str]:
        """Its Jinja2 templates (prompts, expression)."""
        return [t for t in (getattr(self, "prompt", None), getattr(self, "system_prompt", None)) if t]


class _Prompted(_Column):
    prompt: str = Field(description="Jinja2 template of the user message sent to the writer model.")
    system_prompt: Optional[str] = Field(None, description="Jinja2 template of the system message.")

    @model_validator(mode="after")
    def _parses(self) -> _Prompted:
        for text in self.templates():
            check_template(text, f"columns.{self.name}")
        return self


class LLMTextColumn(_Prompted):
    """Free text from the writer model."""

    column_type: Literal["llm-text"] = "llm-text"


def sentences(text: str, min_chars: int, max_chars: int) -> list[str]:
    """The sentences of ``text`` (split after . ! ? and a space, whitespace normalised) of
    ``min_chars``..``max_chars`` characters, each once, in order."""
    found = [s for s in re.split(r"(?<=[.!?])\s+", " ".join(str(text).split())) if min_chars <= len(s) <= max_chars]
    return list(dict.fromkeys(found))


class LLMStructuredColumn(_Prompted):
    """A JSON value the writer model makes to ``output_format`` (a JSON schema; constrained decoding
    where the endpoint offers it); a value that fails the schema drops its row (gate ``schema``).
    ``copy_from`` names string properties to be copied from the row: property -> column path; such a
    property's schema gets an ``enum`` of that text's sentences (within its minLength..maxLength),
    so constrained decoding can only copy one of them word for word."""

    column_type: Literal["llm-structured"] = "llm-structured"
    output_format: dict[str, Any] = Field(description="JSON schema of the value.")
    copy_from: dict[str, str] = Field(
        {}, description="String property -> column path of the text it copies one sentence of, e.g. evidence: chunk."
    )

    @model_validator(mode="after")
    def _copies_strings(self) -> LLMStructuredColumn:
        properties = self.output_format.get("properties", {})
        for name in self.copy_from:
            if properties.get(name, {}).get("type") != "string":
                raise RecipeError(
                    f"columns.{self.name}.copy_from: {name} is not a string property of output_format",
                    fields=("columns",),
                )
        return self

    def schema_for(self, row: dict[str, Any]) -> dict[str, Any]:
        """The schema for ``row``: ``output_format`` with each ``copy_from`` property limited to the
        sentences of its text (left as it is where the text has none that fit)."""
        properties = dict(self.output_format.get("properties", {}))
        for name, path in self.copy_from.items():
            try:
                text = lookup(row, path)
            except KeyError:
                continue
            rule = properties[name]
            choices = sentences(str(text), rule.get("minLength", 1), rule.get("maxLength", 10_000))
            if choices:
                properties[name] = {**rule, "enum": choices}
        return {**self.output_format, "properties": properties}

    @field_validator("output_format")
    @classmethod
    def _is_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise RecipeError(f"columns: output_format is not a JSON schema ({exc.message})") from None
        return value

    def schema(self) -> dict[str, Any]:
        """The JSON schema the value must meet."""
        return self.output_format


class Score(BaseModel):
    """One judged quality: its name, what it means, and each score's meaning."""

    model_config = {"extra": "forbid"}
    name: str
    description: str
    options: dict[int, str] = Field(
        min_length=2, description="Score -> what it means (for example 1: poor ... 5: excellent)."
    )


class LLMJudgeColumn(_Prompted):
    """Scores from the writer model acting as judge: ``{score name: {"reasoning": ..., "score": n}}``."""

    column_type: Literal["llm-judge"] = "llm-judge"
    scores: list[Score] = Field(min_length=1)

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the judgement (reasoning first, then the score)."""
        one = {
            s.name: {
                "type": "object",
                "properties": {
                    "reasoning": {"type": "string", "maxLength": JUDGE_REASONING_CHARS},
                    "score": {"type": "integer", "enum": sorted(s.options)},
                },
                "required": ["reasoning", "score"],
                "additionalProperties": False,
            }
            for s in self.scores
        }
        return {"type": "object", "properties": one, "required": list(one), "additionalProperties": False}

    def rubric(self) -> str:
        """The scores and their meanings, as text appended to the prompt."""
        lines = []
        for s in self.scores:
            options = "; ".join(f"{k}: {v}" for k, v in sorted(s.options.items()))
            lines.append(f"- {s.name}: {s.description} ({options})")
        return "Score the following, answering in JSON with reasoning and score for each:\n" + "\n".join(lines)


class SamplerColumn(_Column):
    """A value drawn without a model: ``category`` (``values``, optional ``weights``) or ``uniform``
    (``low``, ``high``); draws are repeatable from the recipe's ``seed``."""

    column_type: Literal["sampler"] = "sampler"
    sampler_type: Literal[SAMPLER_TYPES]  # type: ignore[valid-type]
    params: dict[str, Any]

    @model_validator(mode="after")
    def _params_fit(self) -> SamplerColumn:
        where = f"columns.{self.name}.params"
        if self.sampler_type == "category":
            values, weights = self.params.get("values"), self.params.get("weights")
            if not isinstance(values, list) or not values:
                raise RecipeError(f"{where}: a category sampler needs 'values', a non-empty list")
            if weights is not None and (len(weights) != len(values) or min(weights) < 0 or not sum(weights)):
                raise RecipeError(f"{where}: 'weights' needs one non-negative number for each value")
        else:
            low, high = self.params.get("low"), self.params.get("high")
            if not all(isinstance(v, (int, float)) for v in (low, high)) or low >= high:
                raise RecipeError(f"{where}: a uniform sampler needs numbers 'low' < 'high'")
        return self

    def sample(self, rng: random.Random) -> Any:
        """One draw."""
        if self.sampler_type == "category":
            return rng.choices(self.params["values"], weights=self.params.get("weights"))[0]
        return rng.uniform(self.params["low"], self.params["high"])


class ExpressionColumn(_Column):
    """A Jinja2 expression over the row (``{{ qa.question }}``), rendered as text."""

    column_type: Literal["expression"] = "expression"
    expr: str

    @model_validator(mode="after")
    def _parses(self) -> ExpressionColumn:
        check_template(self.expr, f"columns.{self.name}")
        return self

    def templates(self) -> list[str]:
        """Its expression."""
        return [self.expr]


Column = Annotated[
    Union[LLMTextColumn, LLMStructuredColumn, LLMJudgeColumn, SamplerColumn, ExpressionColumn],
    Field(discriminator="column_type"),
]
MODEL_COLUMNS = (LLMTextColumn, LLMStructuredColumn, LLMJudgeColumn)
