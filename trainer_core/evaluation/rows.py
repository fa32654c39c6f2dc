"""Evaluation rows: canonical conversations -> (prompt, reference) pairs.

A row's prompt is every turn before its last assistant turn (system, user and earlier assistant
turns) and its reference is that last assistant answer, so a multi-turn conversation is scored on
its final answer with the earlier turns as context. A row with tools gives one evaluation row per
assistant turn instead (each with the turns before it as its prompt): its calls are made mid-way
(call, tool result, words), and each turn is a point where the model must call or answer
(``evaluation.tool_calls``). Rows without an assistant turn after some
context cannot be scored and are counted as skipped; raw-text data (column ``text``) has no
answers at all and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import datasets

from trainer_core.data.files import DatasetError
from trainer_core.data.formats import message_lines
from trainer_core.data.images import MARKER
from trainer_core.data.tool_rows import TOOLS


@dataclass
class EvalRow:
    """One held-out row. ``index`` is its 0-based position in the evaluation set; ``prompt`` the
    turns before the answer (dicts with role and content); ``reference`` the expected answer;
    ``images`` (a vision-language model's rows) the prompt's images; ``tools`` the row's functions."""

    index: int
    prompt: list[dict[str, str]]
    reference: str
    images: list[str] = field(default_factory=list)  # the prompt's images, one per <image> marker, in order
    tools: str = ""  # the row's functions (``data.tool_rows``: JSON text, '' for none)

    @property
    def conversation(self) -> list[dict[str, str]]:
        """Prompt plus the reference as the final assistant turn (what training renders)."""
        return [*self.prompt, {"role": "assistant", "content": self.reference}]

    @property
    def prompt_text(self) -> str:
        """The prompt for people: a lone user turn as its text, otherwise 'role: content' lines."""
        if len(self.prompt) == 1 and self.prompt[0]["role"] == "user":
            return self.prompt[0]["content"]
        return message_lines(self.prompt)


def to_rows(dataset: datasets.Dataset, source: str) -> tuple[list[EvalRow], int]:
    """(rows that have a prompt and an answer, number skipped) from canonical rows (a row with tools:
    one per assistant turn, see the module docstring). Raises
    DatasetError naming ``source`` for raw-text data or when no row has an answer."""
    if "messages" not in dataset.column_names:
        raise DatasetError(
            f"{source} is raw text: evaluation needs conversations with a prompt and an answer "
            "(Alpaca, ShareGPT, messages or prompt/completion rows)"
        )
    rows, skipped = [], 0
    images = dataset["images"] if "images" in dataset.column_names else [[] for _ in range(len(dataset))]
    tools = dataset[TOOLS] if TOOLS in dataset.column_names else [""] * len(dataset)
    for index, (messages, pictures, row_tools) in enumerate(zip(dataset["messages"], images, tools)):
        turns = [{"role": m["role"], "content": m["content"] or ""} for m in messages]
        answers = [i for i, m in enumerate(turns) if m["role"] == "assistant" and i > 0]
        if not answers:
            skipped += 1
            continue
        for last in answers if row_tools else answers[-1:]:
            shown = sum(m["content"].count(MARKER) for m in turns[:last])  # the answer's own images are not its input
            rows.append(
                EvalRow(index, turns[:last], turns[last]["content"], list(pictures or [])[:shown], row_tools or "")
            )
    if not rows:
        raise DatasetError(
            f"{source}: none of its {len(dataset)} rows has an assistant answer after a prompt, "
            "so there is nothing to score"
        )
    return rows, skipped
