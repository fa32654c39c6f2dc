"""Chat rows with media (images, audio clips), read the same way whatever the medium: the pieces the
kinds that read media share (``kinds.vision.rows``, ``kinds.audio_chat.rows``).

- ``column_references``: each row's references from the media columns (LLaMA-Factory's ``images`` /
  ``audios`` lists, a Hub ``Image`` / ``Audio`` column read without decoding);
- ``lift_parts``: OpenAI-style content parts of the medium (``image_url``, ``input_audio``, ...) taken
  out of the turns, each replaced by the medium's marker where it stood;
- ``place_markers``: a row's markers checked against its item count (as written, else all at the
  start of the first user turn, as TRL's ``prepare_multimodal_messages`` does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import datasets

from trainer_core.data.errors import RowError
from trainer_core.data.media import MEDIA_FEATURES

TURN_COLUMNS = {"messages": "content", "conversations": "value"}  # turn list column -> its text key


def undecoded(feature: Any) -> Any:
    """A Hub ``Image`` / ``Audio`` feature (or a list of them) that yields ``{"bytes", "path"}``
    instead of decoding, so that limits are checked before anything is decoded; others as they are."""
    if type(feature).__name__ in MEDIA_FEATURES:
        return type(feature)(decode=False)
    inner = getattr(feature, "feature", None)
    if inner is not None and type(inner).__name__ in MEDIA_FEATURES:
        return datasets.List(type(inner)(decode=False))
    return feature


def column_references(dataset: datasets.Dataset, columns: list[str]) -> list[list[Any]]:
    """Per row, the non-empty references its ``columns`` hold (a value or a list of them), in column order."""
    references: list[list[Any]] = [[] for _ in range(len(dataset))]
    for name in columns:
        values = dataset.cast_column(name, undecoded(dataset.features[name]))[name]
        for index, value in enumerate(values):
            items = value if isinstance(value, list) else [value]
            references[index].extend(item for item in items if item not in (None, ""))
    return references


def parts_of(turn: Any, key: str, part_types: tuple[str, ...]) -> list[Any]:
    """The content parts of one turn (its ``key``: a list of parts) whose type is in ``part_types``, else []."""
    content = turn.get(key) if isinstance(turn, dict) else None
    if not isinstance(content, list):
        return []
    return [part for part in content if isinstance(part, dict) and part.get("type") in part_types]


def has_parts(dataset: datasets.Dataset, part_types: tuple[str, ...]) -> bool:
    """True when a turn of the first 1,000 rows holds a content part of ``part_types``."""
    for column, key in TURN_COLUMNS.items():
        if column in dataset.column_names:
            for turns in dataset.select(range(min(len(dataset), 1000)))[column]:
                if any(parts_of(turn, key, part_types) for turn in turns or []):
                    return True
    return False


def lift_parts(
    dataset: datasets.Dataset, part_types: tuple[str, ...], reference_of: Callable[[dict], Any], marker: str
) -> tuple[list[list[Any]], datasets.Dataset]:
    """Content parts of ``part_types`` taken out of the turns: (per row, their references in order,
    ``reference_of(part)``; the rows with each such part replaced by a text part holding
    ``marker``). Rows without such parts are unchanged."""
    column = next((c for c in TURN_COLUMNS if c in dataset.column_names), None)
    refs: list[list[Any]] = [[] for _ in range(len(dataset))]
    if column is None:
        return refs, dataset
    key = TURN_COLUMNS[column]
    turns_out = []
    found = False
    for index, turns in enumerate(dataset[column]):
        lifted = []
        for turn in turns or []:
            if parts_of(turn, key, part_types):
                found = True
                parts = []
                for part in turn[key]:
                    if isinstance(part, dict) and part.get("type") in part_types:
                        refs[index].append(reference_of(part))
                        parts.append({"type": "text", "text": marker})
                    else:
                        parts.append(part)
                turn = {**turn, key: parts}
            lifted.append(turn)
        turns_out.append(lifted)
    if not found:
        return refs, dataset
    rows = dataset.to_list()
    for row, turns in zip(rows, turns_out):
        row[column] = turns
    return refs, datasets.Dataset.from_list(rows, features=dataset.features)  # turns mixing text and parts: Json


def place_markers(messages: list[dict[str, str]], count: int, marker: str, noun: str) -> list[dict[str, str]]:
    """``messages`` with ``count`` ``marker`` markers: as written when the row has any (their number
    must be ``count``), else all at the start of the first user turn. RowError (``noun``: "image",
    "audio clip") when they differ or there is no user turn to put them in."""
    markers = sum(message["content"].count(marker) for message in messages)
    if markers == count:
        return messages
    if markers:
        raise RowError(
            f"its turns hold {markers} {marker} marker(s) but it has {count} {noun}(s): give one marker per "
            f"{noun}, where the {noun} goes"
        )
    users = [i for i, message in enumerate(messages) if message["role"] == "user"]
    if not users:
        raise RowError(f"it has {count} {noun}(s) and no user turn to show them in: add a user turn")
    first = users[0]
    placed = [dict(message) for message in messages]
    placed[first]["content"] = marker * count + placed[first]["content"]
    return placed
