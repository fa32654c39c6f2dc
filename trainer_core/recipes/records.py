"""One record made: the seed row, then each column in order (samplers drawn, expressions rendered,
model columns asked), then the row gates (``gates.row_failure``) and the output row. A record
that fails a step is returned with the gate's name and why, never raised."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Optional

from jinja2 import TemplateError

from trainer_core.recipes.columns import (
    ExpressionColumn,
    LLMJudgeColumn,
    LLMStructuredColumn,
    SamplerColumn,
    lookup,
    template,
)
from trainer_core.recipes.gates import row_failure, schema_failure
from trainer_core.recipes.schema import FORMAT_FIELDS, Output, Recipe
from trainer_core.recipes.writer import CutShort, ModelFailure, Writer


@dataclass
class Record:
    """A record's outcome: its columns, its output row (kept) or the gate that dropped it."""

    index: int
    row: dict[str, Any] = field(default_factory=dict)
    output: Optional[dict[str, Any]] = None
    reason: Optional[str] = None  # a gates.DROP_REASONS name
    detail: str = ""


class _Dropped(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _render(text: str, row: dict[str, Any], where: str) -> str:
    try:
        return template(text).render(**row)
    except (TemplateError, ArithmeticError, TypeError, ValueError) as exc:  # a missing key, the sandbox, 1/0
        raise _Dropped("expression", f"{where}: {exc.__class__.__name__}: {str(exc)[:200]}") from None


def _asked(column: Any, row: dict[str, Any], writer: Writer) -> Any:
    """A model column's value: text, or the parsed JSON that meets its schema."""
    prompt = _render(column.prompt, row, f"columns.{column.name}")
    if isinstance(column, LLMJudgeColumn):
        prompt = f"{prompt}\n\n{column.rubric()}"
    messages = [{"role": "user", "content": prompt}]
    if column.system_prompt:
        messages.insert(0, {"role": "system", "content": _render(column.system_prompt, row, f"columns.{column.name}")})
    schema = column.schema() if isinstance(column, (LLMStructuredColumn, LLMJudgeColumn)) else None
    asked = column.schema_for(row) if isinstance(column, LLMStructuredColumn) else schema  # copy_from's choices
    try:
        answer = writer.ask(messages, asked, column.name)
    except ModelFailure as exc:
        raise _Dropped("model_error", f"columns.{column.name}: {exc}") from None
    except CutShort as exc:
        raise _Dropped("schema", f"columns.{column.name}: {exc}") from None
    if schema is None:
        return answer.strip()
    try:
        value = json.loads(answer)
    except ValueError:
        raise _Dropped("schema", f"columns.{column.name}: the answer is not JSON ({answer[:80]!r})") from None
    failure = schema_failure(value, schema)
    if failure:
        raise _Dropped("schema", f"columns.{column.name}: {failure}")
    return value


def output_row(row: dict[str, Any], output: Output) -> dict[str, Any]:
    """The dataset row in ``output.format``: each field's value from its column path (text, or for
    ``messages`` a list of ``{role, content}``); an optional field left out is empty."""
    made: dict[str, Any] = {}
    for name in FORMAT_FIELDS[output.format]:
        path = output.fields.get(name)
        if path is None:
            made[name] = ""
            continue
        try:
            value = lookup(row, path)
        except KeyError:
            raise _Dropped("expression", f"output.fields.{name}: {path} is not in the row") from None
        if name == "messages":
            if not (
                isinstance(value, list)
                and value
                and all(isinstance(m, dict) and {"role", "content"} <= set(m) for m in value)
            ):
                raise _Dropped("schema", f"output.fields.messages: {path} is not a list of {{role, content}} turns")
            made[name] = [{"role": str(m["role"]), "content": str(m["content"])} for m in value]
        else:
            made[name] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return made


def make_record(recipe: Recipe, writer: Writer, seed_row: dict[str, Any], index: int) -> Record:
    """Record ``index`` made from ``seed_row``: columns, row gates, output row."""
    record = Record(index, dict(seed_row))
    rng = random.Random(f"{recipe.seed}:{index}")
    try:
        for column in recipe.columns:
            if isinstance(column, SamplerColumn):
                record.row[column.name] = column.sample(rng)
            elif isinstance(column, ExpressionColumn):
                record.row[column.name] = _render(column.expr, record.row, f"columns.{column.name}").strip()
            else:
                record.row[column.name] = _asked(column, record.row, writer)
        failed = row_failure(record.row, recipe.gates)
        if failed:
            raise _Dropped(*failed)
        record.output = output_row(record.row, recipe.output)
    except _Dropped as exc:
        record.reason, record.detail = exc.reason, exc.detail
    return record
