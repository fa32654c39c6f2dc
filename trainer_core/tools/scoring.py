"""Scores of a model's tool calls against held-out tool rows (issue: tool-call evaluation).

Each row is one point of a conversation where the model answers: the ``expected`` calls of the
row's assistant turn (``[]`` where it answered in words), and what the model said there, parsed by
its call format into ``calls`` (``{"name", "arguments"}``, arguments a dict or JSON text) with
``attempted`` (it began a call, even one that did not parse). Against the row's ``tools``:

- ``valid_call_rate``: of the answers that attempted a call, the share whose every call parsed,
  names a defined function and has arguments valid against its ``parameters`` (``jsonschema``);
- ``name_accuracy``: of the rows that should call, the share whose first call names the expected
  function;
- ``arguments_exact``: of the rows that should call, the share whose calls equal the expected ones
  (names, and arguments compared as parsed JSON: key order free), in order;
- ``called_when_should`` / ``quiet_when_should_not``: the shares of rows that should call and did
  attempt one, and of rows that should answer in words and attempted none.

A share is None where its denominator is 0 (no such rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from trainer_core.tools.definitions import ToolsError, argument_errors, functions, parsed_arguments


@dataclass(frozen=True)
class Said:
    """What the model said at one row: its parsed ``calls`` and whether it ``attempted`` a call."""

    calls: list[dict[str, Any]]
    attempted: bool


@dataclass(frozen=True)
class CallScores:
    """The shares of the module docstring (0..1 or None) and the row counts behind them."""

    rows: int
    should_call: int
    attempted: int
    valid_call_rate: Optional[float]
    name_accuracy: Optional[float]
    arguments_exact: Optional[float]
    called_when_should: Optional[float]
    quiet_when_should_not: Optional[float]


def _share(hits: int, count: int) -> Optional[float]:
    return hits / count if count else None


def _arguments(call: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The call's arguments as a dict; None when they are not a JSON object."""
    try:
        return parsed_arguments(call.get("arguments"))
    except ToolsError:
        return None


def valid(calls: list[dict[str, Any]], tools: list[dict[str, Any]]) -> bool:
    """True when there is at least one call and each names a function of ``tools`` (``tool_list``
    form) with arguments valid against its parameters."""
    defined = functions(tools)
    for call in calls:
        function, arguments = defined.get(call.get("name")), _arguments(call)
        if function is None or arguments is None or argument_errors(function, arguments) is not None:
            return False
    return bool(calls)


def same_calls(said: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """True when ``said`` and ``expected`` name the same functions in order with equal arguments
    (parsed JSON: key order free)."""
    if len(said) != len(expected):
        return False
    return all(
        a.get("name") == b.get("name") and _arguments(a) is not None and _arguments(a) == _arguments(b)
        for a, b in zip(said, expected)
    )


def score_calls(
    expected: list[list[dict[str, Any]]], said: list[Said], tools: list[list[dict[str, Any]]]
) -> CallScores:
    """The scores of ``said`` (one per row) against ``expected`` with each row's ``tools``. Raises
    ValueError when the three lists differ in length."""
    if not len(expected) == len(said) == len(tools):
        raise ValueError(f"{len(expected)} expected answers, {len(said)} answers and {len(tools)} tool lists")
    calling = [i for i, calls in enumerate(expected) if calls]
    quiet = [i for i, calls in enumerate(expected) if not calls]
    attempts = [i for i, answer in enumerate(said) if answer.attempted or answer.calls]
    first = [said[i].calls[0].get("name") if said[i].calls else None for i in calling]
    return CallScores(
        rows=len(expected),
        should_call=len(calling),
        attempted=len(attempts),
        valid_call_rate=_share(sum(valid(said[i].calls, tools[i]) for i in attempts), len(attempts)),
        name_accuracy=_share(sum(name == expected[i][0]["name"] for name, i in zip(first, calling)), len(calling)),
        arguments_exact=_share(sum(same_calls(said[i].calls, expected[i]) for i in calling), len(calling)),
        called_when_should=_share(sum(said[i].attempted or bool(said[i].calls) for i in calling), len(calling)),
        quiet_when_should_not=_share(sum(not (said[i].attempted or said[i].calls) for i in quiet), len(quiet)),
    )
