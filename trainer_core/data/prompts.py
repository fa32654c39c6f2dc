"""Prompts for GRPO, as users bring them, in TRL's conversational prompt form.

TRL's ``GRPOTrainer`` samples completions to a ``prompt`` column (a message list ending with the
user's turn: it renders it through the chat template with the generation prompt) and hands every
other column to the reward functions. Layouts read, detected from the columns:

- ``prompt``: a string (one user turn) or a message list (TRL's conversational prompt; a trailing
  assistant turn becomes the reference ``answer`` when the row has none);
- ``question`` (GSM8K, MATH-style files), used as the prompt;
- ``messages`` / ``conversations`` (OpenAI / ShareGPT): the turns up to the last user turn, the
  assistant turn after it (if any) as ``answer`` when the row has none;
- ``instruction`` (+ ``input``) (Alpaca): one user turn, ``output`` as ``answer`` when absent.

A ``system`` column becomes the leading system message. Other columns stay as they are, for the
rewards (``answer``, ``solution``, ...). ``custom_format_mapping`` renames columns first (e.g.
``prompt`` -> ``problem``). A source without any of these is refused, naming the file and the fix;
a row without a prompt, naming the row.
"""

from __future__ import annotations

from typing import Any

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.formats import conversation_turns, text_field, turn_text
from trainer_core.data.media import refuse_media
from trainer_core.data.text_values import TextConversions
from trainer_core.request.mappings import mapping_text

PROMPT_LAYOUTS = "prompt (text or messages), question, messages / conversations, or instruction (+ input)"
_LAYOUT_COLUMNS = {
    "prompt": ("prompt", "system"),
    "question": ("question", "system"),
    "messages": ("messages", "system"),
    "conversations": ("conversations", "system"),
    "instruction": ("instruction", "input", "output", "system"),
}
ANSWER = "answer"


def prompt_layout(columns: list[str], source: str) -> str:
    """The column the prompts of ``columns`` come from (the first of ``prompt``, ``question``,
    ``messages``, ``conversations``, ``instruction`` present). Raises DatasetError naming ``source``
    and the fix when there is none."""
    for name in _LAYOUT_COLUMNS:
        if name in columns:
            return name
    raise DatasetError(
        f"{source} has no prompt for GRPO (its columns: {', '.join(columns) or 'none'}): give {PROMPT_LAYOUTS}, "
        "or map your column with custom_format_mapping (e.g. " + mapping_text({"prompt": "problem"}) + ")",
        fields=("custom_format_mapping",),
    )


def _turns(value: Any, field: str, conv: TextConversions) -> list[dict[str, str]]:
    if isinstance(value, str) or isinstance(value, (int, float)) and not isinstance(value, bool):
        text = text_field({field: value}, field, conv)
        return [{"role": "user", "content": text}]
    if not isinstance(value, list) or not value:
        raise RowError(f"field {field!r} is empty or not text / a list of turns: give the prompt")
    return [turn_text(turn, position, conv, field) for position, turn in enumerate(value, start=1)]


def _prompt_row(row: dict, layout: str, conv: TextConversions) -> tuple[list[dict[str, str]], Any]:
    """(prompt messages, the reference answer found beside them or None) of one row."""
    if layout == "instruction":
        instruction = text_field(row, "instruction", conv)
        extra = text_field(row, "input", conv, required=False)
        turns = [{"role": "user", "content": f"{instruction}\n\n{extra}" if extra.strip() else instruction}]
        reference = row.get("output")
    else:
        turns = _turns(row.get(layout), layout, conv)
        reference = None
        last_user = max((i for i, t in enumerate(turns) if t["role"] == "user"), default=None)
        if last_user is None:
            raise RowError(f"field {layout!r} has no user turn: the prompt must end with the user's question")
        after = turns[last_user + 1 :]
        if after and after[0]["role"] == "assistant":
            reference = after[0]["content"]
        turns = turns[: last_user + 1]
    messages = conversation_turns(turns, row, conv)
    if not messages[-1]["content"].strip():
        raise RowError("the prompt is empty: fill it in or remove the row")
    return messages, reference


def canonical_prompts(dataset: datasets.Dataset, name: str, first_row: int = 1) -> datasets.Dataset:
    """``dataset`` (one source, mapped) as GRPO rows: column ``prompt`` (messages ending with the
    user's turn) plus its other columns, ``answer`` filled from the layout's reference answer where
    the source has none (see the module). Raises DatasetError naming ``name`` and, for a bad row,
    its 1-based row number (``first_row`` is the file row of ``dataset[0]``)."""
    refuse_media(dataset, name, first_row)
    layout = prompt_layout(dataset.column_names, name)
    used = [c for c in _LAYOUT_COLUMNS[layout] if c in dataset.column_names]
    rest = [c for c in dataset.column_names if c not in used]
    conv = TextConversions()
    prompts, references = [], []
    for index, row in enumerate(dataset.select_columns(used).to_list()):
        try:
            messages, reference = _prompt_row(row, layout, conv)
        except RowError as exc:
            raise DatasetError(f"{name}, row {first_row + index}: {exc}") from None
        prompts.append(messages)
        references.append(reference)
    if "completion" in rest:  # prompt / completion rows: the completion is the reference answer
        dataset = (
            dataset.rename_column("completion", ANSWER) if ANSWER not in rest else dataset.remove_columns("completion")
        )
        rest = [ANSWER if c == "completion" else c for c in rest if c != "completion" or ANSWER not in rest]
    out = dataset.select_columns(rest) if rest else datasets.Dataset.from_dict({"_": [None] * len(dataset)})
    out = out.add_column("prompt", prompts) if rest else datasets.Dataset.from_dict({"prompt": prompts})
    if ANSWER not in rest and any(r is not None for r in references):
        out = out.add_column(ANSWER, [None if r is None else str(r) for r in references])
    return out


def prompt_text(messages: list[dict[str, str]]) -> str:
    """The user's last turn of a canonical prompt (what the live table shows)."""
    users = [m["content"] for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""
