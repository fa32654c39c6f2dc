"""Tool-call scores of generated answers on held-out rows with tools (``tools.scoring.score_calls``).

Only the evaluation rows that have tools are scored (a row with tools gives one evaluation row per
assistant turn: ``evaluation.rows``). The expected calls of a row are its reference turn's canonical
Hermes blocks (``tools.render.split_calls``; ``[]`` for an answer in words); what the model said is
its answer (special tokens kept: ``generation.Answer.raw``) parsed in the model's call format
(``answer_format``: the template's own, or ``hermes`` where training wrote the fallback block), with
``attempted`` where a call begins in it (``tools.parse.call_start``), parsed or not. No row with
tools: no scores (None), so a plain-text evaluation shows none of the five.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from trainer_core.data.tool_rows import NATIVE, loaded, tool_format
from trainer_core.evaluation.rows import EvalRow
from trainer_core.tools.definitions import ToolsError
from trainer_core.tools.parse import call_format, call_start, parse_calls
from trainer_core.tools.render import FALLBACK_FORMAT, split_calls
from trainer_core.tools.scoring import CallScores, Said, score_calls


@dataclass
class ToolScores:
    """The scores over the rows with tools and, per evaluation row, the calls parsed from its answer
    (``{"name", "arguments": dict}``; None for a row without tools)."""

    scores: CallScores
    calls: list[Optional[list[dict[str, Any]]]]


def expected_calls(reference: str) -> list[dict[str, Any]]:
    """The calls of a reference assistant turn (``{"name", "arguments": dict}``; [] for words or a
    block that does not parse, which training refused anyway)."""
    try:
        return split_calls(reference, "reference")[1]
    except ToolsError:
        return []


def said(answer: str, fmt: str) -> Said:
    """What an answer says in call format ``fmt``: its parsed calls (arguments as dicts) and whether
    it began a call at all."""
    _, calls = parse_calls(answer, fmt)
    parsed = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])} for c in calls]
    return Said(parsed, call_start(answer, fmt) is not None)


def answer_format(tokenizer: Any) -> str:
    """The call format the model answers in: its template's (``call_format``) where the template
    takes tools, else the fallback's (``render.FALLBACK_FORMAT``), which training wrote then."""
    return call_format(tokenizer) if tool_format(tokenizer) == NATIVE else FALLBACK_FORMAT


def score_tool_answers(answers: list[str], rows: list[EvalRow], fmt: str) -> Optional[ToolScores]:
    """The tool-call scores of ``answers`` (one per row of ``rows``, same order) parsed in ``fmt``;
    None when no row has tools. Raises ValueError when the two lists differ in length."""
    if len(answers) != len(rows):
        raise ValueError(f"{len(answers)} answers for {len(rows)} rows")
    scored = [k for k, row in enumerate(rows) if row.tools]
    if not scored:
        return None
    saids = {k: said(answers[k], fmt) for k in scored}
    scores = score_calls(
        [expected_calls(rows[k].reference) for k in scored],
        [saids[k] for k in scored],
        [loaded(rows[k].tools) for k in scored],
    )
    return ToolScores(scores, [saids[k].calls if k in saids else None for k in range(len(rows))])
