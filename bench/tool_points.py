"""The held-out tool rows of ``bench.tool_calls``: the evaluation points of a run's ``val_size`` split
(as the studio's evaluation rebuilds it) and their turns as an OpenAI client sends them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainer_core.evaluation.rows import EvalRow


def held_out_points(request: dict[str, Any]) -> list[EvalRow]:
    """The evaluation points of the run's held-out rows with tools: the studio's own ``val_size``
    split of the request, rebuilt (``data.prepare.eval_conversations``), one per assistant turn."""
    from trainer_core.data.prepare import eval_conversations
    from trainer_core.evaluation.rows import to_rows
    from trainer_core.schemas import TrainingStartRequest

    rows, _ = to_rows(eval_conversations(TrainingStartRequest(**request)), Path(request["local_datasets"][0]).name)
    return [row for row in rows if row.tools]


def openai_messages(prompt: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Canonical turns (calls as Hermes blocks, results as ``<tool_response>`` turns) as an OpenAI
    client sends them: assistant ``tool_calls`` with ids, ``tool`` messages with the ``tool_call_id``
    of the call they answer, in order."""
    from trainer_core.tools.render import call_id, split_calls, unwrapped_result

    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for index, turn in enumerate(prompt):
        if turn["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": pending.pop(0), "content": unwrapped_result(turn["content"])})
            continue
        text, calls = split_calls(turn["content"]) if turn["role"] == "assistant" else (turn["content"], [])
        if not calls:
            out.append({"role": turn["role"], "content": turn["content"]})
            continue
        pending = [call_id(f"{index}:{n}") for n in range(len(calls))]
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for i, c in zip(pending, calls)
        ]
        out.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
    return out
