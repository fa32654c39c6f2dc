"""The dataset preview's table: the first rows turn by turn (``sample_frame``: chat, text,
preference and prompt rows), or the rows of a kind that reads its own columns (``KindRows``, the
answer of ``ModelKind.preview_rows``) column by column; each text cut to TURN_CHARS characters and
escaped for Markdown."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import datasets
import pandas as pd

from trainer_core.data.images import thumbnail
from trainer_core.data.prompt_tokens import is_prompt_rows
from trainer_core.data.tool_rows import TOOLS, shown_tools, shown_turn

TURN_CHARS = 300  # characters shown per turn (or per text row, or per cell of a kind's rows) in the sample
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")
_LINE_MARK = re.compile(r"(?m)^(\s*)([-+=])")  # a list bullet or a heading underline
_NUMBERED = re.compile(r"(?m)^(\s*\d+)([.)])")  # a numbered list item
_SINGLE_NEWLINE = re.compile(r"(?<!\n)\n(?!\n)")


@dataclass(frozen=True)
class KindRows:
    """A kind's own reading of the first rows of a file for the dataset preview
    (``ModelKind.preview_rows``). ``layout``: words for the summary (the shape found and what it
    trains with, e.g. "embedding triplets: anchor / positive / negative — MultipleNegativesRankingLoss");
    ``rows``: a ``datasets.Dataset`` of the rows as the kind reads them, shown column by column;
    ``lengths``: each row's tokens as the kind counts them (its longest text), None without a
    tokenizer; ``max_seq_length``: the tokens a row is cut at; ``notes``: lines for the summary."""

    layout: str
    rows: Any
    lengths: Optional[list[int]]
    max_seq_length: int
    notes: list[str] = field(default_factory=list)


def columns_frame(rows: Any) -> pd.DataFrame:
    """Display rows for ``rows`` (a ``datasets.Dataset``): column ``row`` (1-based), then each of
    its columns in order, every value as text, cut (``cut``) and escaped (``escape``)."""
    table: dict[str, Any] = {"row": range(1, len(rows) + 1)}
    for column in rows.column_names:
        table[column] = [escape(cut(str(value))) for value in rows[column]]
    return pd.DataFrame(table)


def sample_frame(canonical: datasets.Dataset) -> pd.DataFrame:
    """Display rows for canonical rows: columns ``row`` (1-based) and ``conversation`` (Markdown:
    one ``**role:** content`` block per turn, a leading system turn included, blocks separated by a
    blank line) or ``text``. Each turn (or text) is cut to TURN_CHARS characters with an ellipsis,
    then Markdown/HTML characters are backslash-escaped so tags such as ``<tool_call>`` show, and
    single newlines inside a turn become Markdown hard breaks; rows with images get an ``images``
    column of thumbnails and names. Preference rows: columns ``row``,
    ``prompt`` and the answer columns (``chosen`` / ``rejected`` or ``completion`` and ``label``);
    GRPO prompt rows: ``prompt`` and the other columns (what the rewards read)."""
    if "prompt" in canonical.column_names:  # preference rows: prompt, then each answer column
        table = {"row": range(1, len(canonical) + 1)}
        for column in ("prompt", "chosen", "rejected", "completion"):
            if column in canonical.column_names:
                table[column] = [_turns_markdown(messages) for messages in canonical[column]]
        if "label" in canonical.column_names:
            table["label"] = ["desirable" if label else "undesirable" for label in canonical["label"]]
        if is_prompt_rows(canonical.column_names):  # GRPO: the columns the rewards read, as written
            for column in canonical.column_names:
                if column != "prompt" and not column.startswith("_"):
                    table[column] = [escape(cut(str(value))) for value in canonical[column]]
        return pd.DataFrame(table)
    if "text" in canonical.column_names:
        cells, column = [escape(cut(text)) for text in canonical["text"]], "text"
    else:
        tools = canonical[TOOLS] if TOOLS in canonical.column_names else [None] * len(canonical)
        cells = [_turns_markdown(messages, row_tools) for messages, row_tools in zip(canonical["messages"], tools)]
        column = "conversation"
    table = {"row": range(1, len(cells) + 1), column: cells}
    if "images" in canonical.column_names:
        table["images"] = [" ".join(_image_cell(ref) for ref in refs) for refs in canonical["images"]]
    return pd.DataFrame(table)


def _image_cell(reference: str) -> str:
    """One image of a preview row in Markdown: its thumbnail (``images.thumbnail``) and its name."""
    name = "embedded image" if reference.startswith("data:") else escape(Path(reference).name)
    return f"![{name}]({thumbnail(reference)}) {name}"


def _turns_markdown(messages: list[dict[str, str]], tools: Optional[str] = None) -> str:
    """Turns as Markdown paragraphs, calls and results shown as such (``tool_rows.shown_turn``),
    after the row's function names when it has ``tools``."""
    shown = [shown_tools(tools), *(shown_turn(m) for m in messages)]
    return "\n\n".join(f"**{role}:** {escape(cut(text))}" for role, text in filter(None, shown))


def cut(text: str) -> str:
    """``text`` cut to TURN_CHARS characters (with an ellipsis)."""
    return text if len(text) <= TURN_CHARS else text[: TURN_CHARS - 1] + "…"


def escape(text: str) -> str:
    """``text`` with Markdown and HTML characters backslash-escaped (CommonMark escapes), a line's
    leading ``-`` / ``+`` / ``=`` or ``1.`` escaped too (else a cell holding "-" shows a list
    bullet), and single newlines made hard line breaks (two spaces before them), so lines stay lines
    when rendered."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    text = _LINE_MARK.sub(r"\1\\\2", _NUMBERED.sub(r"\1\\\2", text))
    return _SINGLE_NEWLINE.sub("  \n", text)
