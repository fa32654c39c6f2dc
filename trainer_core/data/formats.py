"""Detect a dataset's layout and normalise it to one canonical form.

The canonical form is either the columns ``messages`` (a list of ``{"role", "content"}`` with roles
system / user / assistant / tool) and ``tools`` (the row's functions as JSON text, '' for none:
``tool_rows``) for conversational data, or one column ``text`` for raw text.
Row numbers in errors are 1-based rows of the file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.media import refuse_media
from trainer_core.data.text_values import TextConversions, content_text
from trainer_core.data.tool_rows import (
    TOOLS,
    calls_content,
    check_calls,
    in_system,
    loaded,
    row_tools,
    shown_tools,
    shown_turn,
)
from trainer_core.request.mappings import mapping_text
from trainer_core.vocabulary import FormatType

# a source role -> (our role, text before the content, text after it)
ROLES: dict[str, tuple[str, str, str]] = {
    "system": ("system", "", ""),
    "human": ("user", "", ""),
    "user": ("user", "", ""),
    "gpt": ("assistant", "", ""),
    "assistant": ("assistant", "", ""),
    "function_call": ("assistant", "<tool_call>\n", "\n</tool_call>"),
    "observation": ("tool", "<tool_response>\n", "\n</tool_response>"),
    "tool": ("tool", "<tool_response>\n", "\n</tool_response>"),
}
KNOWN_ROLES = ", ".join(ROLES)
MESSAGE_FEATURES = datasets.Features(
    {"messages": datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")})}
)
CONVERSATION_FEATURES = datasets.Features({**MESSAGE_FEATURES, TOOLS: datasets.Value("string")})
log = logging.getLogger(__name__)
TEXT_FEATURES = datasets.Features({"text": datasets.Value("string")})
NORMALIZE_ROWS = 5_000  # rows made Python objects at once while normalising
REQUIRED = {
    FormatType.sharegpt: ["conversations"],
    FormatType.messages: ["messages"],
    FormatType.alpaca: ["instruction", "output"],
    FormatType.prompt_completion: ["prompt", "completion"],
    FormatType.text: ["text"],
}
EMBEDDING_SHAPES = (  # sentence-transformers' column names of an embedding model's data
    ("anchor", "positive"),
    ("query", "document"),
    ("sentence1", "sentence2", "score"),
)
LAYOUTS = (
    "conversations (ShareGPT), messages (role/content chat), instruction + output (Alpaca), "
    "prompt + completion, or text (raw text)"
)


def detect_format(columns: list[str], source: str) -> FormatType:
    """The layout named by ``columns`` (never ``auto``). Raises DatasetError for preference pairs
    (chosen / rejected: DPO data) and for columns that match no layout."""
    names = set(columns)
    if {"chosen", "rejected"} & names:
        raise DatasetError(
            f"{source} holds preference pairs (columns 'chosen'/'rejected', DPO data), which are not supported "
            "for supervised fine-tuning: choose training_method dpo, orpo or kto to train on them, or use a file of "
            "conversations or instruction/output pairs for sft",
            fields=("training_method",),
        )
    for fmt, required in REQUIRED.items():
        if names.issuperset(required):
            return fmt
    if {"prompt", "answer"} <= names:
        raise DatasetError(
            f"{source} looks like GRPO data (prompts with answers: columns {', '.join(columns)}): choose "
            "training_method grpo; or, to learn the answers word for word with sft, map them with "
            "custom_format_mapping, e.g. " + mapping_text({"instruction": "prompt", "output": "answer"}),
            fields=("training_method", "custom_format_mapping"),
            code="grpo_data_for_sft",
        )
    pairs = next((" / ".join(shape) for shape in EMBEDDING_SHAPES if names.issuperset(shape)), None)
    if pairs:
        raise DatasetError(
            f"{source} holds embedding data (columns {pairs}), which trains an embedding model, not a text "
            "generator: set is_embedding to train this model as an embedder, or pick an embedding model "
            "(a sentence-transformers folder)",
            fields=("is_embedding", "model_name"),
            code="embedding_data_for_generator",
        )
    raise DatasetError(
        f"{source} has columns {list(columns)}, which match no known layout; expected {LAYOUTS}. "
        "Rename the columns, or map them with custom_format_mapping, e.g. "
        + mapping_text({"instruction": "question", "output": "answer"}),
        fields=("custom_format_mapping",),
    )


def apply_mapping(dataset: datasets.Dataset, mapping: dict[str, str], source: str) -> datasets.Dataset:
    """Rename the file's columns to ours; ``mapping`` is our column -> the file's column. A column of
    the file that already has one of our mapped names is dropped. Raises DatasetError when a mapped
    column is not in the file."""
    renames = {theirs: ours for ours, theirs in mapping.items() if theirs != ours}
    for ours, theirs in mapping.items():
        if theirs not in dataset.column_names:
            raise DatasetError(
                f"custom_format_mapping maps {ours!r} to column {theirs!r}, but {source} has no such column; "
                f"its columns are {dataset.column_names}",
                fields=("custom_format_mapping",),
            )
    shadowed = [name for name in renames.values() if name in dataset.column_names and name not in renames]
    return dataset.remove_columns(shadowed).rename_columns(renames) if renames else dataset


def normalize(dataset: datasets.Dataset, fmt: FormatType, source: str, first_row: int = 1) -> datasets.Dataset:
    """``dataset`` in canonical form: column ``messages`` (conversational formats) or ``text``.
    ``normalize_with_notes`` without the notes (they are logged). Raises DatasetError as it does."""
    normalised, notes = normalize_with_notes(dataset, fmt, source, first_row)
    for note in notes:
        log.info("%s: %s", source, note)
    return normalised


def normalize_with_notes(
    dataset: datasets.Dataset, fmt: FormatType, source: str, first_row: int = 1
) -> tuple[datasets.Dataset, list[str]]:
    """``dataset`` in canonical form (column ``messages`` for conversational formats, or ``text``)
    and notes on what was turned into text (``text_values.TextConversions.notes``).

    Numbers and true/false in text fields and turn contents become text; OpenAI content parts are
    joined. ``first_row`` is the file row number of ``dataset[0]`` (for messages after slicing).
    Raises DatasetError naming the file, the row and the problem: missing columns, an empty required
    field, content that is not text (lists, objects, image parts), a row that holds images, audio or
    video (``media.refuse_media``), an unknown role, an empty conversation or one without an
    assistant turn.
    """
    refuse_media(dataset, source, first_row)
    if fmt == FormatType.auto:
        fmt = detect_format(dataset.column_names, source)
    missing = [name for name in REQUIRED[fmt] if name not in dataset.column_names]
    if missing:
        raise DatasetError(
            f"format {fmt.value} needs column(s) {missing}, but {source} has {dataset.column_names}: "
            "choose another format_type or map the columns with custom_format_mapping",
            fields=("format_type", "custom_format_mapping"),
        )
    wanted = [name for name in (*REQUIRED[fmt], *_OPTIONAL.get(fmt, ())) if name in dataset.column_names]
    columns, conversions = dataset.select_columns(wanted), TextConversions()
    parts = [  # a batch of rows as Python objects at a time: memory stays flat in the rows
        _normalized_rows(
            columns.select(range(start, min(start + NORMALIZE_ROWS, len(columns)))),
            fmt,
            conversions,
            source,
            first_row + start,
        )
        for start in range(0, len(columns), NORMALIZE_ROWS)
    ]
    if not parts:
        parts = [_normalized_rows(columns, fmt, conversions, source, first_row)]
    return (parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)), conversions.notes()


def _normalized_rows(
    rows: datasets.Dataset, fmt: FormatType, conversions: TextConversions, source: str, first_row: int
) -> datasets.Dataset:
    """``rows`` (a batch) in canonical form, ``first_row`` the file row number of ``rows[0]``."""
    build, out = _ROW_BUILDERS[fmt], []
    for index, row in enumerate(rows.to_list()):
        try:
            out.append(build(row, conversions))
        except RowError as exc:
            raise DatasetError(f"{source}, row {first_row + index}: {exc}") from None
    if fmt == FormatType.text:
        return datasets.Dataset.from_dict({"text": out}, features=TEXT_FEATURES)
    table = {"messages": [row["messages"] for row in out], TOOLS: [row[TOOLS] for row in out]}
    return datasets.Dataset.from_dict(table, features=CONVERSATION_FEATURES)


def text_field(row: dict, field: str, conv: TextConversions, required: bool = True) -> str:
    """The string in ``row[field]`` (a number or boolean made text); '' when absent and optional.
    RowError for other non-text values or empty required ones."""
    value = conv.text(row.get(field), field)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        kind = "missing" if value is None else f"a {type(value).__name__}, not text"
        raise RowError(f"field {field!r} is {kind}: give it a text value")
    if required and not value.strip():
        raise RowError(f"field {field!r} is empty: fill it in or remove the row")
    return value


def turn_text(turn: Any, position: int, conv: TextConversions, field: str) -> dict[str, str]:
    """One {from, value} or {role, content} turn as our {role, content} (tool text wrapped; content
    parts joined, numbers and booleans made text and counted under ``field``)."""
    if not isinstance(turn, dict):
        raise RowError(f'turn {position} is a {type(turn).__name__}: each turn must be {{"role": ..., "content": ...}}')
    role_key, content_key = ("from", "value") if turn.get("from") is not None else ("role", "content")
    source_role = turn.get(role_key)
    if source_role not in ROLES:
        raise RowError(f"turn {position} has unknown role {source_role!r}; known roles: {KNOWN_ROLES}")
    content = conv.text(content_text(turn.get(content_key), f"turn {position} ({source_role})"), field)
    if turn.get("tool_calls") and ROLES[source_role][0] == "assistant":  # OpenAI calls, content text or null
        return {"role": "assistant", "content": calls_content(turn, content, f"turn {position} ({source_role})")}
    if not isinstance(content, str):
        raise RowError(
            f"turn {position} ({source_role}) has content of type {type(content).__name__}: content must be text"
        )
    role, before, after = ROLES[source_role]
    if before and content.lstrip().startswith(before.strip()):  # already wrapped
        before = after = ""
    return {"role": role, "content": before + content + after}


def _conversation(turns: Any, row: dict, field: str, conv: TextConversions) -> dict[str, Any]:
    """A canonical row (``messages`` and ``tools``, see ``tool_rows``) from a list of turns plus the
    row's optional ``system`` (merged into one leading system message) and ``tools`` fields.
    RowError when it cannot be trained on (``tool_rows.check_calls`` for calls and results)."""
    if not isinstance(turns, list) or not turns:
        raise RowError(f"field {field!r} is empty or not a list: give a list of turns")
    messages = conversation_turns(
        [turn_text(turn, position, conv, field) for position, turn in enumerate(turns, start=1)], row, conv
    )
    assistant = [m for m in messages if m["role"] == "assistant"]
    if not assistant:
        raise RowError(f"{field!r} has no assistant turn: the model learns from assistant (gpt) turns, add one")
    if any(not m["content"].strip() for m in assistant):
        raise RowError(f"{field!r} has an empty assistant turn: fill it in or remove the row")
    tools = row_tools(row.get(TOOLS))
    check_calls(turns, messages, loaded(tools), field)
    return {"messages": messages, TOOLS: tools}


def conversation_turns(
    messages: list[dict[str, str]], row: dict, conv: TextConversions, tools_block: bool = False
) -> list[dict[str, str]]:
    """``messages`` (ours, from ``turn_text``) with the row's optional ``system`` field and a leading
    system turn merged into one leading system message; with ``tools_block``, the row's ``tools``
    too, as the fallback block (``tool_rows.in_system``: for rows that TRL renders, which have no
    ``tools`` column of ours; conversations keep them beside the messages, see ``tool_rows``)."""
    messages = list(messages)
    system_parts = [text_field(row, "system", conv, required=False)]
    if messages and messages[0]["role"] == "system":
        system_parts.append(messages.pop(0)["content"])
    system = "\n\n".join(part for part in system_parts if part)
    if system:
        messages.insert(0, {"role": "system", "content": system})
    return in_system(messages, row_tools(row.get(TOOLS))) if tools_block else messages


def _alpaca(row: dict, conv: TextConversions) -> dict[str, Any]:
    instruction, extra = text_field(row, "instruction", conv), text_field(row, "input", conv, required=False)
    user = f"{instruction}\n\n{extra}" if extra.strip() else instruction
    turns: list[dict[str, str]] = []
    history = row.get("history") or []
    if not isinstance(history, list) or any(not isinstance(pair, (list, tuple)) or len(pair) != 2 for pair in history):
        raise RowError("field 'history' must be a list of [query, response] pairs")
    for query, response in history:
        turns += [{"role": "user", "content": query}, {"role": "assistant", "content": response}]
    turns += [{"role": "user", "content": user}, {"role": "assistant", "content": text_field(row, "output", conv)}]
    return _conversation(turns, row, "history", conv)


def _prompt_completion(row: dict, conv: TextConversions) -> dict[str, Any]:
    prompt, completion = row.get("prompt"), row.get("completion")
    if isinstance(prompt, list) and isinstance(completion, list):  # conversational prompt/completion (TRL)
        return _conversation(prompt + completion, row, "prompt", conv)
    turns = [
        {"role": "user", "content": text_field(row, "prompt", conv)},
        {"role": "assistant", "content": text_field(row, "completion", conv)},
    ]
    return _conversation(turns, row, "prompt", conv)


_ROW_BUILDERS: dict[FormatType, Callable[[dict, TextConversions], Any]] = {
    FormatType.alpaca: _alpaca,
    FormatType.sharegpt: lambda row, conv: _conversation(row.get("conversations"), row, "conversations", conv),
    FormatType.messages: lambda row, conv: _conversation(row.get("messages"), row, "messages", conv),
    FormatType.prompt_completion: _prompt_completion,
    FormatType.text: lambda row, conv: text_field(row, "text", conv),
}
_OPTIONAL: dict[FormatType, tuple[str, ...]] = {
    FormatType.alpaca: ("input", "system", "history"),
    FormatType.sharegpt: ("system", "tools"),
    FormatType.messages: ("system", "tools"),
    FormatType.prompt_completion: ("system",),
}


def message_lines(messages: list[dict[str, str]], limit: Optional[int] = None, tools: Optional[str] = None) -> str:
    """'role: content' lines for display, cut to ``limit`` characters (with an ellipsis): calls as
    ``call NAME {arguments}``, results as ``result: ...`` (``tool_rows.shown_turn``), after a
    ``tools: NAMES`` line when the row has ``tools`` (the canonical column's text)."""
    shown = [shown_tools(tools), *(shown_turn(m) for m in messages)]
    text = "\n".join(f"{role}: {content}" for role, content in filter(None, shown))
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"
