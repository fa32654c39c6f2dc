"""Training rows with images, in canonical form: ``messages`` (turns whose text holds one
``<image>`` marker where each image goes) and ``images`` (one canonical reference per marker, in
order: ``images.resolve_reference``).

The layouts people bring:
- LLaMA-Factory / ShareGPT: ``messages`` or ``conversations`` with ``<image>`` markers and an
  ``images`` list of paths relative to the data file (``mllm_demo.json``);
- OpenAI content parts: ``{"type": "image_url", "image_url": {"url": <path or data: URL>}}`` (or
  ``{"type": "image", "image": ...}``) inside a turn's content; each becomes a marker where it stood;
- a Hugging Face dataset with an ``Image`` column (one image or a list), usually without markers:
  a row without any marker gets its images at the start of its first user turn (TRL's
  ``prepare_multimodal_messages`` does the same).

Each row is checked when it is read, so the Check and Start refuse it by file and row: every image
passes the path check and opens within the pixel limit, and a row with markers has exactly as many
markers as images. Audio and video stay refused (``data.media``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import datasets

from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.formats import MESSAGE_FEATURES, normalize_with_notes
from trainer_core.data.images import MARKER, check_image, resolve_reference
from trainer_core.data.media import MEDIA_FEATURES, media_columns, refuse_media
from trainer_core.vocabulary import FormatType

IMAGE_PART_TYPES = ("image_url", "image", "input_image")
TURN_COLUMNS = {"messages": "content", "conversations": "value"}  # turn list column -> its text key
VISION_FEATURES = datasets.Features({**MESSAGE_FEATURES, "images": datasets.List(datasets.Value("string"))})


def image_columns(dataset: datasets.Dataset) -> list[str]:
    """The columns of ``dataset`` that hold images (``images`` lists, Hub ``Image`` features)."""
    return [name for name, kind in media_columns(dataset).items() if kind == "image"]


def has_images(dataset: datasets.Dataset) -> bool:
    """True when ``dataset`` has an image column or a turn with an image content part (first 1,000
    rows looked at for parts)."""
    if image_columns(dataset):
        return True
    for column in TURN_COLUMNS:
        if column in dataset.column_names:
            for turns in dataset.select(range(min(len(dataset), 1000)))[column]:
                if any(_parts_of(turn, TURN_COLUMNS[column]) for turn in turns or []):
                    return True
    return False


def normalize_vision(
    dataset: datasets.Dataset,
    fmt: FormatType,
    source: str,
    base: Optional[Path],
    roots: Iterable[Path],
    first_row: int = 1,
) -> tuple[datasets.Dataset, list[str]]:
    """Canonical vision rows (columns ``messages`` and ``images``, ``VISION_FEATURES``) of one source
    and the notes of ``formats.normalize_with_notes``. ``base``: the folder relative image paths are
    read from (the data file's); ``roots``: the allowed folders. Raises DatasetError naming
    ``source`` and the file row for a missing, unreadable, oversized or disallowed image, a marker
    count that differs from the image count, a row with audio or video, and whatever the text
    layout refuses."""
    roots = list(roots)
    columns = image_columns(dataset)
    references = [[] for _ in range(len(dataset))]
    for name in columns:
        values = dataset.cast_column(name, _undecoded(dataset.features[name]))[name]
        for index, value in enumerate(values):
            items = value if isinstance(value, list) else [value]
            references[index].extend(item for item in items if item not in (None, ""))
    text_only = dataset.remove_columns(columns)
    refuse_media(text_only, source, first_row, reads="images and text")  # audio and video
    part_refs, text_only = _lift_parts(text_only, source, first_row)
    canonical, notes = normalize_with_notes(text_only, fmt, source, first_row)
    rows_images: list[list[str]] = []
    messages_out = []
    for index, messages in enumerate(canonical["messages"]):
        row = first_row + index
        try:
            refs = [resolve_reference(ref, base, roots) for ref in references[index] + part_refs[index]]
            for ref in refs:
                check_image(ref)
            messages = _place(messages, len(refs))
        except RowError as exc:
            raise DatasetError(f"{source}, row {row}: {exc}") from None
        messages_out.append(messages)
        rows_images.append(refs)
    rows = datasets.Dataset.from_dict({"messages": messages_out, "images": rows_images}, features=VISION_FEATURES)
    return rows, notes


def _undecoded(feature: Any) -> Any:
    """A Hub ``Image`` feature (or a list of them) that yields ``{"bytes", "path"}`` instead of
    decoding: the pixel limit is checked before anything is decoded."""
    if type(feature).__name__ in MEDIA_FEATURES:
        return datasets.Image(decode=False)
    inner = getattr(feature, "feature", None)
    if inner is not None and type(inner).__name__ in MEDIA_FEATURES:
        return datasets.List(datasets.Image(decode=False))
    return feature


def _place(messages: list[dict[str, str]], count: int) -> list[dict[str, str]]:
    """``messages`` with ``count`` image markers: as written when the row has any (their number
    must be ``count``), else all at the start of the first user turn. RowError when they differ."""
    markers = sum(message["content"].count(MARKER) for message in messages)
    if markers == count:
        return messages
    if markers:
        raise RowError(
            f"its turns hold {markers} {MARKER} marker(s) but it has {count} image(s): give one marker per image, "
            "where the image goes"
        )
    users = [i for i, message in enumerate(messages) if message["role"] == "user"]
    if not users:
        raise RowError(f"it has {count} image(s) and no user turn to show them in: add a user turn")
    first = users[0]
    placed = [dict(message) for message in messages]
    placed[first]["content"] = MARKER * count + placed[first]["content"]
    return placed


def _parts_of(turn: Any, key: str) -> list[Any]:
    """The image parts of one turn's content (a list of content parts), else []."""
    content = turn.get(key) if isinstance(turn, dict) else None
    if not isinstance(content, list):
        return []
    return [part for part in content if isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES]


def _part_reference(part: dict[str, Any]) -> Any:
    """The path / URL an image content part names (OpenAI's ``image_url.url``, or ``image`` / ``url``)."""
    value = part.get("image_url") if part.get("type") == "image_url" else part.get("image", part.get("image_url"))
    if isinstance(value, dict):
        value = value.get("url") or value.get("path")
    return value if value is not None else part.get("url") or part.get("path")


def _lift_parts(dataset: datasets.Dataset, source: str, first_row: int) -> tuple[list[list[Any]], datasets.Dataset]:
    """Image content parts taken out of the turns: (per row, the references in order; the rows with
    each image part replaced by a text part holding a marker). Rows without parts are unchanged."""
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
            if _parts_of(turn, key):
                found = True
                parts = []
                for part in turn[key]:
                    if isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES:
                        refs[index].append(_part_reference(part))
                        parts.append({"type": "text", "text": MARKER})
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
