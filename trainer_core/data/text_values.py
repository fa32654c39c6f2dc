"""Values that stand for text in a row, made text: numbers and true/false in a text field, and
OpenAI-style content parts (``[{"type": "text", "text": ...}, ...]``) in a turn.

Numbers and booleans are written as JSON writes them (``42``, ``3.5``, ``true``) and counted per
column, so the preview and the pre-flight can say what changed (``TextConversions.notes``). Text
parts are joined with newlines; image, audio and file parts are refused: the models trained here
read text only.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from trainer_core.data.errors import RowError
from trainer_core.model_kind import way_out

TEXT_PARTS = {
    "text": "text",
    "input_text": "text",
    "output_text": "text",
    "refusal": "refusal",
}  # type -> key of its text
MEDIA_PARTS = {
    "image_url": "an image part",
    "input_image": "an image part",
    "image": "an image part",
    "image_file": "an image part",
    "input_audio": "an audio part",
    "audio": "an audio part",
    "audio_url": "an audio part",
    "video_url": "a video part",
    "video": "a video part",
    "file": "a file part",
    "input_file": "a file part",
}


class TextConversions:
    """Counts of numbers and booleans turned into text, per column (``"output"``, ``"messages"``)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()  # (column, "number" | "boolean") -> values

    def text(self, value: Any, column: str) -> Any:
        """``value`` as text when it is a number or a boolean (counted under ``column``), else as it is."""
        if isinstance(value, bool) or (isinstance(value, (int, float)) and value == value):  # NaN stays as it is
            self.counts[column, "boolean" if isinstance(value, bool) else "number"] += 1
            return json.dumps(value)
        return value

    def notes(self) -> list[str]:
        """One line per column, e.g. "column 'output': 3 numbers and 1 boolean turned into text"."""
        columns = dict.fromkeys(column for column, _ in sorted(self.counts))
        lines = []
        for column in columns:
            parts = [
                f"{n} {kind}{'s' if n != 1 else ''}"
                for kind in ("number", "boolean")
                if (n := self.counts[column, kind])
            ]
            lines.append(f"column {column!r}: {' and '.join(parts)} turned into text")
        return lines


def content_text(content: Any, where: str) -> Any:
    """A turn's content as text when it is a list of content parts (text parts joined with "\\n", as
    OpenAI's chat format reads them); any other value is returned as it is. ``where`` names the turn
    in errors ("turn 2 (user)"). Raises RowError for an image, audio, video or file part (a text-only
    model cannot learn from it) and for a part that is not a ``{"type": ...}`` object of a known type."""
    if not isinstance(content, list):
        return content
    texts = []
    for number, part in enumerate(content, start=1):
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in MEDIA_PARTS:
            medium = MEDIA_PARTS[kind].split()[1]  # "an audio part" -> "audio"
            instead = f", or {way_out(medium)}" if medium in ("image", "audio") else ""
            raise RowError(
                f"{where}, content part {number} is {MEDIA_PARTS[kind]} (type {kind!r}); this model reads text only: "
                f"remove image, audio and file parts from the data{instead}"
            )
        if kind not in TEXT_PARTS or not isinstance(part.get(TEXT_PARTS[kind]), str):
            raise RowError(
                f"{where}, content part {number} is not a text part: write text parts as "
                '{"type": "text", "text": "..."} or give the content as plain text'
            )
        texts.append(part[TEXT_PARTS[kind]])
    return "\n".join(texts)
